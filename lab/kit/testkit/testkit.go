// Package testkit puts the probe and the controller on a real
// kube-apiserver for their tests: it starts one (with its real etcd and RBAC),
// applies deploy/fleet-role.yaml server-side exactly as an install does,
// creates Nodes through the API the way k3s labels and annotates them, and
// hands out clients holding tokens of the components' own ServiceAccounts
// (TokenRequest), so every request a loop makes is authorised as in a
// cluster.
//
// The kubelet is the only fake: there is none, so no pod runs. The probe and
// the controller run as in-process loops or as processes of the built binary,
// and a Sampler of the test's own stands in for the host readings where that
// makes a test exact.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

// The ServiceAccounts deploy/fleet-role.yaml creates.
const (
	ProbeSA      = "fleet-role-probe"
	ControllerSA = "fleet-role"
)

// Settings are the shipped defaults with time compressed for tests: a short
// sample period and the smallest window the tail percentile allows (window
// 20 at p95: 1/(1-0.95) = 20), so that the settings still validate. The
// election timeout stays k3s's 5 s: the limits derive from it, not from the
// period.
func Settings(t testing.TB, period time.Duration) settings.Settings {
	t.Helper()
	s := settings.Defaults()
	s.SamplePeriod = period
	s.TailPercentile = 0.95
	s.Window = 20
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Cluster is a real API server with fleet-role installed.
type Cluster struct {
	Server    *apiserver.Server
	Admin     kubernetes.Interface
	Namespace string
	// RecordsNamespace holds the probes' records (settings.RecordsNamespace).
	RecordsNamespace string
}

// Start runs etcd and kube-apiserver and applies deploy/fleet-role.yaml with
// kubectl apply --server-side.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, Manifest(t))
}

// StartActing is Start with the install that acts applied instead,
// deploy/fleet-role-acting.yaml (deploy/acting).
func StartActing(t testing.TB) *Cluster {
	t.Helper()
	return StartWith(t, filepath.Join(RepoRoot(t), "deploy", "fleet-role-acting.yaml"))
}

// StartWith is Start applying the manifest at path.
func StartWith(t testing.TB, manifest string) *Cluster {
	t.Helper()
	s := apiservertest.Start(t)
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	d := settings.Defaults()
	c := &Cluster{Server: s, Admin: admin, Namespace: d.Namespace, RecordsNamespace: d.RecordsNamespace()}
	kc := c.Kubeconfig(t, "")
	out, err := exec.Command(testenv.Kubectl(t), "--kubeconfig", kc, "apply", "--server-side", "-f", manifest).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -f %s: %v\n%s", manifest, err, out)
	}
	return c
}

// Manifest is the path of deploy/fleet-role.yaml, found from the module root.
func Manifest(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "deploy", "fleet-role.yaml")
}

// RepoRoot is the directory holding go.mod above the test's directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// Token issues a token of ServiceAccount sa through TokenRequest, as the
// kubelet does for a pod.
func (c *Cluster) Token(t testing.TB, sa string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := c.Server.TokenFor(ctx, c.Namespace, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ProbePod creates, as the admin, a Pod of the probe's ServiceAccount on
// node (spec.nodeName set, as the DaemonSet controller sets it; no kubelet
// runs it) and returns its name and UID, for a token bound to it.
func (c *Cluster) ProbePod(t testing.TB, node string) (string, types.UID) {
	t.Helper()
	return c.Pod(t, ProbeSA, node)
}

// Pod creates, as the admin, a Pod of ServiceAccount sa on node, as
// ProbePod does for the probe's.
func (c *Cluster) Pod(t testing.TB, sa, node string) (string, types.UID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: sa + "-", Namespace: c.Namespace},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: sa,
			Containers:         []corev1.Container{{Name: "c", Image: "fleet-role:test"}},
		},
	}
	created, err := c.Admin.CoreV1().Pods(c.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a pod of %s on %s: %v", sa, node, err)
	}
	return created.Name, created.UID
}

// ProbeToken is a token of the probe's ServiceAccount bound to a Pod on
// node, as the kubelet issues the DaemonSet's pod there: the admission
// policy lets it write node's record alone.
func (c *Cluster) ProbeToken(t testing.TB, node string) string {
	t.Helper()
	return c.PodToken(t, ProbeSA, node)
}

// PodToken is a token of ServiceAccount sa bound to a Pod on node, as the
// kubelet issues a DaemonSet's pod there.
func (c *Cluster) PodToken(t testing.TB, sa, node string) string {
	t.Helper()
	name, uid := c.Pod(t, sa, node)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := c.Server.TokenForPod(ctx, c.Namespace, sa, name, uid, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ProbeClient is a client acting as the probe on node, with a token bound
// to a Pod there.
func (c *Cluster) ProbeClient(t testing.TB, node string) *kube.Client {
	t.Helper()
	return c.clientFor(t, c.ProbeToken(t, node))
}

// ProbeKubeconfig writes a kubeconfig acting as the probe on node.
func (c *Cluster) ProbeKubeconfig(t testing.TB, node string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "probe-"+strconv.Itoa(len(node))+".kubeconfig")
	if err := c.Server.Kubeconfig(path, c.ProbeToken(t, node)); err != nil {
		t.Fatal(err)
	}
	return path
}

// Client is a client acting as ServiceAccount sa with a token of its own.
// The tests compress a 15 s period to a fraction of a second, so the client's
// rate limit is raised by the same factor (client-go's 5 requests a second
// would otherwise hold a loop of two requests a period back), and a request
// is bounded by 5 s so that a stopped API server costs a loop little.
func (c *Cluster) Client(t testing.TB, sa string) *kube.Client {
	t.Helper()
	return c.clientFor(t, c.Token(t, sa))
}

// ClientForToken is a client authenticating with token, rated and bounded
// as Client's.
func (c *Cluster) ClientForToken(t testing.TB, token string) *kube.Client {
	t.Helper()
	return c.clientFor(t, token)
}

func (c *Cluster) clientFor(t testing.TB, token string) *kube.Client {
	t.Helper()
	cfg := c.Server.TokenConfig(token)
	cfg.QPS, cfg.Burst = 200, 400
	cfg.Timeout = 5 * time.Second
	cl, err := kube.NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Kubeconfig writes a kubeconfig acting as ServiceAccount sa (the admin when
// sa is empty) and returns its path.
func (c *Cluster) Kubeconfig(t testing.TB, sa string) string {
	t.Helper()
	tok := ""
	name := "admin"
	if sa != "" {
		tok, name = c.Token(t, sa), sa
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := c.Server.Kubeconfig(path, tok); err != nil {
		t.Fatal(err)
	}
	return path
}

// Node is a Node as k3s and fleet-role's labels would have it.
type Node struct {
	Name string
	// Voter: a k3s server with embedded etcd (node-role.kubernetes.io/etcd=true
	// and the etcd.k3s.cattle.io annotations).
	Voter bool
	// Eligible and Pinned are written "true" or "false", never left out,
	// as the README's k3s drop-in does.
	Eligible, Pinned bool
	// Address is the InternalIP and, on voters, k3s's node-address.
	Address string
	// PeerAddress, when set, is fleet-role's peer-address annotation.
	PeerAddress string
}

// Object is the Node as k3s and the labels would write it.
func (n Node) Object() *corev1.Node {
	s := settings.Defaults()
	k := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name,
		Labels: map[string]string{
			"kubernetes.io/hostname": n.Name,
			s.EligibleLabel:          strconv.FormatBool(n.Eligible),
			s.PinnedLabel:            strconv.FormatBool(n.Pinned),
		},
		Annotations: map[string]string{},
	}}
	if n.Voter {
		k.Labels[k3snode.EtcdRoleLabel] = "true"
		k.Labels["node-role.kubernetes.io/control-plane"] = "true"
		k.Annotations["etcd.k3s.cattle.io/node-name"] = n.Name + "-1a2b3c4d"
		k.Annotations[k3snode.NodeAddressAnnotation] = n.Address
	}
	if n.PeerAddress != "" {
		k.Annotations[probe.PeerAddressAnnotation] = n.PeerAddress
	}
	k.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.Address}, {Type: corev1.NodeHostName, Address: n.Name}}
	return k
}

// AddNodes creates the Nodes through the API as the admin.
func (c *Cluster) AddNodes(t testing.TB, nodes ...Node) {
	t.Helper()
	for _, n := range nodes {
		k := n.Object()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		created, err := c.Admin.CoreV1().Nodes().Create(ctx, k, metav1.CreateOptions{})
		if err == nil {
			// Addresses are status: a kubelet reports them, so they go in
			// through the status subresource.
			created.Status.Addresses = k.Status.Addresses
			_, err = c.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		}
		cancel()
		if err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}
}

// SetLabel sets a label on a Node as the admin (kubectl label --overwrite).
func (c *Cluster) SetLabel(t testing.TB, node, key, value string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Admin.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label node %s %s=%s: %v", node, key, value, err)
	}
}

// Status reads and decodes the published status.json as a reader would.
func (c *Cluster) Status(t testing.TB) (*status.Status, error) {
	t.Helper()
	raw, ok := c.Data(t, "fleet-role-status")[status.StatusKey]
	if !ok {
		return nil, errors.New("no status.json yet")
	}
	return status.UnmarshalStatus([]byte(raw))
}

// Data reads a ConfigMap's data as the admin.
func (c *Cluster) Data(t testing.TB, name string) map[string]string {
	t.Helper()
	cm := c.ConfigMap(t, name)
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

// ConfigMap reads a ConfigMap as the admin.
func (c *Cluster) ConfigMap(t testing.TB, name string) *corev1.ConfigMap {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm, err := c.Admin.CoreV1().ConfigMaps(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// PatchData sets (or, with nil, removes) one key of a ConfigMap as the admin,
// the way `kubectl patch --type=merge` does.
func (c *Cluster) PatchData(ctx context.Context, name, key string, value *string) error {
	body, err := json.Marshal(map[string]map[string]*string{"data": {key: value}})
	if err != nil {
		return err
	}
	_, err = c.Admin.CoreV1().ConfigMaps(c.Namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl-patch"})
	return err
}

// WriteRecord writes node's record as the admin (kubectl apply of a
// hand-made record): a record's labels and the entry text, no owner.
func (c *Cluster) WriteRecord(ctx context.Context, node, text string) error {
	return kube.NewRecordsFor(c.Admin.CoreV1().ConfigMaps(c.RecordsNamespace), c.RecordsNamespace).Put(ctx, record.Owner{Name: node}, text)
}

// RecordSource starts an informer over the records with cl's credentials,
// as the controller command does, stopped when the test ends.
func RecordSource(t testing.TB, cl *kube.Client, namespace string) *kube.RecordInformer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inf := cl.NewRecordInformer(namespace)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = inf.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := inf.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	return inf
}

// Eventually polls cond every 20 ms until it returns nil or the deadline
// passes, and then fails the test with cond's last error.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sampler is a probe.Sampler of the test's own: it makes each sample with
// Make and records every sample it took and every plan it was given, so a
// test can compare exactly what a prober took with what the ConfigMap holds.
type Sampler struct {
	// Make builds sample seq (0-based) taken at at for plan; nil makes Fit.
	Make func(plan probe.Plan, seq int, at time.Time) entry.Sample
	// Fail gives the readings that failed in sample seq, which the probe
	// writes into the sample's Errors; nil fails none.
	Fail func(seq int) []probe.Failure
	// FsyncReading is what Fsync returns; nil returns a fit reading.
	FsyncReading func(ctx context.Context) entry.FsyncReading
	// Clock stamps the samples and readings; nil is the real clock. A test
	// that runs the probe on a fake clock gives the sampler the same one,
	// so that samples are a period apart as the loop sees them.
	Clock clock.PassiveClock

	mu     sync.Mutex
	taken  []entry.Sample
	plans  []probe.Plan
	fsyncs int
}

// Sample implements probe.Sampler. Taken holds each sample as the probe
// writes it: with the failures' texts in its Errors.
func (s *Sampler) Sample(_ context.Context, plan probe.Plan) (entry.Sample, []probe.Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.now().UTC()
	mk := s.Make
	if mk == nil {
		mk = Fit
	}
	seq := len(s.taken)
	x := mk(plan, seq, at)
	var failed []probe.Failure
	if s.Fail != nil {
		failed = s.Fail(seq)
	}
	written := x
	written.Errors = slices.Clip(written.Errors) // its own array: the probe appends to x's
	for _, f := range failed {
		written.Errors = append(written.Errors, f.Text())
	}
	s.taken = append(s.taken, written)
	s.plans = append(s.plans, plan)
	return x, failed
}

// Fsync implements probe.Sampler.
func (s *Sampler) Fsync(ctx context.Context) entry.FsyncReading {
	s.mu.Lock()
	s.fsyncs++
	f := s.FsyncReading
	s.mu.Unlock()
	if f != nil {
		return f(ctx)
	}
	return FitFsync(s.now())
}

func (s *Sampler) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// Taken returns the samples taken so far.
func (s *Sampler) Taken() []entry.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]entry.Sample(nil), s.taken...)
}

// Plans returns the plan of every sample taken so far.
func (s *Sampler) Plans() []probe.Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]probe.Plan(nil), s.plans...)
}

// Fsyncs is how many disk readings were asked for.
func (s *Sampler) Fsyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fsyncs
}

// MemberID is the etcd member ID the test gives a voter node: unpadded
// lowercase hex, as etcd's labels print it.
func MemberID(node string) string {
	var h uint64 = 0x8e9e05c52164694d
	for _, b := range []byte(node) {
		h = h*0x100000001b3 ^ uint64(b)
	}
	return strconv.FormatUint(h, 16)
}

// Fit is a sample of a healthy host: a wired link, 1 ms connects to every
// peer, 16 GiB available of 64 GiB, no memory stall, a timer woken 2 ms
// late, and on voters an etcd
// with a leader, connected to every peer, quota 2 GiB. The available memory
// carries seq in its last KiB, so every sample is told apart in the entry.
func Fit(plan probe.Plan, seq int, at time.Time) entry.Sample {
	stall, late := 0.0, 0.002
	s := entry.Sample{
		At:                  at,
		Link:                entry.Link{Interface: "eth0", Class: entry.ClassWired},
		MemTotalBytes:       64 << 30,
		MemAvailableBytes:   16<<30 + uint64(seq)*1024,
		MemFullStallSeconds: &stall,
		WakeupLateSeconds:   &late,
	}
	if len(plan.Peers) > 0 {
		s.Connect = map[string]entry.Connect{}
		for _, p := range plan.Peers {
			s.Connect[p.Node] = entry.Connect{Seconds: 0.001}
		}
	}
	if plan.Voter {
		s.Etcd = &entry.EtcdSample{HasLeader: true, ConnectedPeers: len(plan.Peers), KnownPeers: len(plan.Peers), QuotaBytes: 2 << 30, DBSizeBytes: 20 << 20}
	}
	return s
}

// FitFsync is a disk reading well under the 10 ms fact.
func FitFsync(at time.Time) entry.FsyncReading {
	return entry.FsyncReading{At: at.UTC(), Dir: "/var/lib/fleet-role/fsync", Filesystem: "ext4", MeasuredDisk: true,
		Writes: 10029, P99Seconds: 0.0021, MaxSeconds: 0.0093}
}

// Seq is the sequence number Fit put in a sample (its KiB of memory above
// 16 GiB), or -1.
func Seq(s entry.Sample) int {
	if s.MemAvailableBytes < 16<<30 {
		return -1
	}
	return int((s.MemAvailableBytes - 16<<30) / 1024)
}

// Millis is each sample's time to the millisecond, as the entry keeps it.
func Millis(samples []entry.Sample) []int64 {
	out := make([]int64, len(samples))
	for i, s := range samples {
		out[i] = s.At.UnixMilli()
	}
	return out
}

// History records every entry each record took, from a watch of the records
// (and their tails: the tail layout, docs/records.md) held by the admin:
// every write the API server accepted is seen, however quickly the next one
// follows. Its keys are the records' node names; an entry is what the record
// and its tail read as together (record.Assemble), or why they cannot be
// read.
type History struct {
	mu       sync.Mutex
	objs     map[string]*corev1.ConfigMap // record or tail name -> last seen
	versions map[string][]string          // node -> distinct entries in order
	owners   map[string][]metav1.OwnerReference
	events   int
	err      error
	done     chan struct{}
}

// WatchRecords starts recording; it stops when ctx ends (Wait waits for it).
func (c *Cluster) WatchRecords(ctx context.Context, t testing.TB) *History {
	t.Helper()
	h := &History{objs: map[string]*corev1.ConfigMap{}, versions: map[string][]string{}, owners: map[string][]metav1.OwnerReference{}, done: make(chan struct{})}
	opts := metav1.ListOptions{LabelSelector: record.AnySelector}
	l, err := c.Admin.CoreV1().ConfigMaps(c.RecordsNamespace).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		h.record(&l.Items[i])
	}
	opts.ResourceVersion = l.ResourceVersion
	w, err := c.Admin.CoreV1().ConfigMaps(c.RecordsNamespace).Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						h.fail(errors.New("watch of the records closed early"))
					}
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					h.record(ev.Object.(*corev1.ConfigMap))
				case watch.Error:
					h.fail(fmt.Errorf("watch of the records: %v", ev.Object))
					return
				}
			}
		}
	}()
	return h
}

// Owners returns the owner references node's record had when last seen.
func (h *History) Owners(node string) []metav1.OwnerReference {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owners[node]
}

func (h *History) record(cm *corev1.ConfigMap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events++
	h.objs[cm.Name] = cm
	k := record.NodeOf(cm)
	rec := h.objs[k]
	if rec == nil || !record.IsRecord(rec) {
		return // a tail before its record
	}
	var tail *corev1.ConfigMap
	if tn, ok := record.TailName(k); ok {
		tail = h.objs[tn]
	}
	_, v, err := record.Assemble(rec, tail)
	if err != nil {
		v = "unreadable: " + err.Error()
	}
	h.owners[k] = rec.OwnerReferences
	vs := h.versions[k]
	if len(vs) == 0 || vs[len(vs)-1] != v {
		h.versions[k] = append(vs, v)
	}
}

func (h *History) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
}

// Err is the watch's error so far, if it has failed (closed early, or an
// error event), without waiting: a test that waits for the watch to see a
// write can then say why it never will.
func (h *History) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Wait waits for the watch to end and returns its error.
func (h *History) Wait() error {
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Versions returns every distinct entry node's record held, in order.
func (h *History) Versions(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.versions[key]...)
}

// Events is how many versions of the records were seen.
func (h *History) Events() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events
}

// Keys returns the nodes whose records were seen, sorted.
func (h *History) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for k := range h.versions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Log is a JSON slog logger into memory, for tests that check what a loop
// logged.
type Log struct {
	*slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewLog returns an empty log.
func NewLog() *Log {
	l := &Log{}
	l.Logger = slog.New(slog.NewJSONHandler(lockedWriter{l}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return l
}

type lockedWriter struct{ l *Log }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

// String is everything logged, one JSON line each.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Records returns every record logged with message msg, decoded.
func (l *Log) Records(msg string) []map[string]any {
	l.mu.Lock()
	text := l.buf.String()
	l.mu.Unlock()
	return ParseLog(text, msg)
}

// ParseLog decodes the JSON lines of a log with message msg.
func ParseLog(text, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(text, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Loop is a component's Run started by a test, stopped in t.Cleanup.
type Loop struct {
	Name   string
	Cancel context.CancelFunc // what SIGTERM does to the command
	done   chan error         // holds Run's result once it has returned
}

// Go starts run in a goroutine.
func Go(t testing.TB, name string, run func(context.Context) error) *Loop {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Loop{Name: name, Cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- run(ctx) }()
	t.Cleanup(func() { l.Stop(t) })
	return l
}

// Stop cancels the loop and waits for Run to return; Run must return nil.
func (l *Loop) Stop(t testing.TB) {
	t.Helper()
	l.Cancel()
	select {
	case err := <-l.done:
		l.done <- err // for the next Stop or Alive
		if err != nil {
			t.Errorf("%s returned %v", l.Name, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute", l.Name)
	}
}

// Alive fails the test if Run has returned.
func (l *Loop) Alive(t testing.TB) {
	t.Helper()
	select {
	case err := <-l.done:
		l.done <- err
		t.Fatalf("%s exited: %v", l.Name, err)
	default:
	}
}

// Entry reads node's record (with its tail, in the tail layout) as the
// admin and decodes its entry; false when there is none.
func (c *Cluster) Entry(t testing.TB, node string) (entry.Entry, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, err := kube.NewRecordsFor(c.Admin.CoreV1().ConfigMaps(c.RecordsNamespace), c.RecordsNamespace).Get(ctx, node)
	if errors.Is(err, kube.ErrNotFound) {
		return entry.Entry{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Decode(text)
	if err != nil {
		t.Fatalf("entry of %s: %v", node, err)
	}
	return e, true
}

// Records reads every record as the admin: node name to entry text.
func (c *Cluster) Records(t testing.TB) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.Admin.CoreV1().ConfigMaps(c.RecordsNamespace).List(ctx, metav1.ListOptions{LabelSelector: record.AnySelector})
	if err != nil {
		t.Fatal(err)
	}
	cms := make([]*corev1.ConfigMap, len(l.Items))
	for i := range l.Items {
		cms[i] = &l.Items[i]
	}
	out, unreadable := record.ReadAll(cms)
	for node, why := range unreadable {
		out[node] = "unreadable: " + why
	}
	return out
}

// StartGarbageCollector runs the real kube-controller-manager against the
// cluster with its garbage collector alone: the only controller fleet-role's
// records rely on (a record is owned by its Node).
func (c *Cluster) StartGarbageCollector(t testing.TB) {
	t.Helper()
	StartControllerManager(t, c.Kubeconfig(t, ""), "garbage-collector-controller")
}

// StartControllerManager runs the real kube-controller-manager with the
// admin kubeconfig kc and only the named controllers, serving nothing and
// electing no leader, and stops it when the test ends (its log's tail
// printed if the test failed).
func StartControllerManager(t testing.TB, kc string, controllers ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.KubeControllerManager(t), "--kubeconfig="+kc,
		"--controllers="+strings.Join(controllers, ","), "--leader-elect=false", "--secure-port=0", "--v=2")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("kube-controller-manager log (tail):\n%s", b[max(0, len(b)-4000):])
			}
		}
	})
}
