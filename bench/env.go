// Package bench measures what fleet-role costs and how fast it decides, on
// this machine, against the real components: a probe sample against a live
// etcd member and a real kube-apiserver beside the shell route the original
// implementation took, the fsync reading beside fio, one decision at three
// fleet sizes, the ConfigMap's footprint, and the periods from a fault to the
// swap being named. cmd/bench runs it all and prints one table; the
// benchmarks in bench_test.go measure the same work under `go test -bench`
// for profiles.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// The fleet the samples are taken in: three voters, each its own etcd
// process, and seven standbys, so that the Node list a sample reads is that
// of a small CI fleet. The probe measured is the first voter's: a voter's
// sample is the dearest, since it scrapes its etcd member as well as
// connecting to the other voters.
const (
	Voters   = 3
	Standbys = 7
	// ProbeSA is the ServiceAccount deploy/fleet-role.yaml gives the probe.
	ProbeSA = "fleet-role-probe"
	// ControllerSA is the controller's.
	ControllerSA = "fleet-role"
)

// Tools are the real binaries the bench runs.
type Tools struct {
	Etcd, KubeAPIServer, Kubectl string
}

// Env is a running fleet: etcd members, a kube-apiserver stored in them, the
// manifests of deploy/fleet-role.yaml applied, and the Nodes as k3s would
// label them.
type Env struct {
	Dir      string
	Root     string // the repository
	Settings settings.Settings
	Etcd     *etcdproc.Cluster
	API      *apiserver.Server
	Admin    kubernetes.Interface
	Tools    Tools
	// Node is the probe's own node: the first voter.
	Node       string
	MetricsURL string // its etcd member's metrics page
	// ProbeKubeconfig acts as the probe's ServiceAccount, with a token
	// bound to a Pod on Node.
	ProbeKubeconfig string
	// AdminKubeconfig acts as the cluster's administrator.
	AdminKubeconfig string
	probeToken      string
}

// VoterName and StandbyName name the fleet's hosts.
func VoterName(i int) string   { return fmt.Sprintf("voter-%d", i+1) }
func StandbyName(i int) string { return fmt.Sprintf("standby-%d", i+1) }

// Start brings the fleet up under dir. etcd's data goes on memory where
// there is a tmpfs, so that this machine's disk does not slow the API server
// the samples talk to; the fsync comparison measures the disk on its own.
func Start(ctx context.Context, root, dir string, tools Tools) (_ *Env, err error) {
	e := &Env{Dir: dir, Root: root, Settings: settings.Defaults(), Tools: tools, Node: VoterName(0)}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	etcdDir, err := os.MkdirTemp(shmOrTemp(), "fleet-role-bench-etcd-")
	if err != nil {
		return nil, err
	}
	e.Etcd, err = etcdproc.Start(ctx, etcdproc.Config{
		Binary: tools.Etcd, Dir: etcdDir, Members: Voters,
		Name: VoterName,
	})
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	e.MetricsURL = e.Etcd.Members[0].MetricsURL
	urls := make([]string, len(e.Etcd.Members))
	for i, m := range e.Etcd.Members {
		urls[i] = m.ClientURL
	}
	e.API, err = apiserver.Start(ctx, apiserver.Config{
		Binary: tools.KubeAPIServer, EtcdServers: urls, Dir: filepath.Join(dir, "apiserver"),
	})
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	// The admin creates hundreds of Nodes to fill the probe ConfigMap; at
	// client-go's default 5 requests a second that alone takes minutes.
	adminCfg := e.API.AdminConfig()
	adminCfg.QPS, adminCfg.Burst = 1000, 1000
	if e.Admin, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return nil, err
	}
	admin := filepath.Join(dir, "admin.kubeconfig")
	e.AdminKubeconfig = admin
	if err := e.API.Kubeconfig(admin, ""); err != nil {
		return nil, err
	}
	manifest := filepath.Join(root, "deploy", "fleet-role.yaml")
	if out, err := exec.CommandContext(ctx, tools.Kubectl, "--kubeconfig", admin, "apply", "--server-side", "-f", manifest).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubectl apply -f %s: %w\n%s", manifest, err, out)
	}
	if err := e.addNodes(ctx); err != nil {
		return nil, err
	}
	if e.probeToken, err = e.ProbeToken(ctx, e.Node); err != nil {
		return nil, err
	}
	e.ProbeKubeconfig = filepath.Join(dir, "probe.kubeconfig")
	if err := e.API.Kubeconfig(e.ProbeKubeconfig, e.probeToken); err != nil {
		return nil, err
	}
	return e, nil
}

// ProbeToken is a token of the probe's ServiceAccount bound to a Pod on
// node, as the kubelet issues one to the DaemonSet's pod there: the admission
// policy of deploy/base/admission.yaml lets it write node's record and no
// other. The Pod is created as the admin with spec.nodeName set, as the
// DaemonSet controller would; no kubelet runs it, and the token needs none.
func (e *Env) ProbeToken(ctx context.Context, node string) (string, error) {
	ns := e.Settings.Namespace
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ProbeSA + "-", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: ProbeSA,
			Containers:         []corev1.Container{{Name: "probe", Image: "fleet-role:bench"}},
			// Restricted, so that the namespace's warn level has nothing
			// to say about a Pod that never runs.
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	created, err := e.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create probe pod on %s: %w", node, err)
	}
	return e.API.TokenForPod(ctx, ns, ProbeSA, created.Name, created.UID, 24*time.Hour)
}

// FleetNodes are the Nodes of a fleet of voters and standbys as k3s labels
// and annotates them, every host eligible and the first voter pinned. The
// members share 127.0.0.1, so each voter carries fleet-role's peer-address
// annotation naming its own peer port, peerAddr(i).
func FleetNodes(s settings.Settings, voters, standbys int, peerAddr func(i int) string) []corev1.Node {
	var nodes []corev1.Node
	for i := range voters + standbys {
		name := StandbyName(i - voters)
		if i < voters {
			name = VoterName(i)
		}
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				s.EligibleLabel:          "true",
				s.PinnedLabel:            strconv.FormatBool(i == 0),
			},
			Annotations: map[string]string{},
		}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
		if i < voters {
			n.Labels[k3snode.EtcdRoleLabel] = "true"
			n.Labels["node-role.kubernetes.io/control-plane"] = "true"
			n.Annotations["etcd.k3s.cattle.io/node-name"] = name + "-1a2b3c4d"
			n.Annotations[k3snode.NodeAddressAnnotation] = "127.0.0.1"
			n.Annotations[probe.PeerAddressAnnotation] = peerAddr(i)
			n.Status.Conditions = []corev1.NodeCondition{{
				Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner",
			}}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func (e *Env) addNodes(ctx context.Context) error {
	nodes := FleetNodes(e.Settings, Voters, Standbys, func(i int) string { return hostPort(e.Etcd.Members[i].PeerURL) })
	_, err := e.createNodes(ctx, nodes)
	return err
}

// createNodes creates Nodes through the API as the admin and returns them
// as created (with their UIDs).
func (e *Env) createNodes(ctx context.Context, nodes []corev1.Node) ([]corev1.Node, error) {
	out := make([]corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		created, err := e.Admin.CoreV1().Nodes().Create(ctx, &n, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create node %s: %w", n.Name, err)
		}
		// Addresses and conditions are status, which a kubelet reports.
		created.Status = n.Status
		if created, err = e.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("node %s status: %w", n.Name, err)
		}
		out = append(out, *created)
	}
	return out, nil
}

// hostPort is the host:port of one of etcdproc's URLs (http://127.0.0.1:PORT).
func hostPort(u string) string {
	if _, hp, ok := strings.Cut(u, "//"); ok {
		return hp
	}
	return u
}

// ProbeClient is a client holding the probe's token. Its rate limit is
// raised above client-go's 5 requests a second: the bench takes samples back
// to back, where a DaemonSet takes one every 15 s.
func (e *Env) ProbeClient() (*kube.Client, error) {
	cfg := e.API.TokenConfig(e.probeToken)
	cfg.QPS, cfg.Burst = 1000, 1000
	return kube.NewClientForConfig(cfg)
}

// NewProber starts the probe of the first voter with the real host
// readings, as `fleet-role probe` builds it (its record in the tail layout,
// which the controller's Lease says it reads, announceTailLayout) but for
// two things: it lists the
// Nodes each sample, where the command reads them from an informer's cache
// (kube.NodeInformer), so that a sample's cost here includes a list of the
// Nodes and bounds the command's from above; and its loop runs on a fake
// clock that ProbeSamples steps, so that its periods come back to back. It
// returns once the loop's first period has written the record; Close stops
// the loop.
func (e *Env) NewProber(ctx context.Context) (*Prober, error) {
	c, err := e.ProbeClient()
	if err != nil {
		return nil, err
	}
	if err := e.announceTailLayout(ctx); err != nil {
		return nil, err
	}
	format, err := c.RecordFormat(e.Settings.Namespace, controller.LeaseName)
	if err != nil {
		return nil, err
	}
	p := &Prober{clk: clocktesting.NewFakeClock(time.Now()), period: e.Settings.SamplePeriod,
		wrote: make(chan struct{}, 1), done: make(chan struct{})}
	records := c.RecordsInLayout(e.Settings.RecordsNamespace(), kube.Layout{Format: format, RetryAfter: e.Settings.Window, CheckEvery: e.Settings.StalePeriods()})
	// The Nodes as the shipped probe reads them (internal/cli/probe.go):
	// from an informer's cache, a list once and then a watch, rather than
	// a list each period, which the probe does not do.
	nodes := c.NewNodeInformer(kube.NodeView(e.Settings, probe.PeerAddressAnnotation), kube.NodeSelectors(e.Settings)...)
	loop, err := probe.New(probe.Config{
		Node:     e.Node,
		Settings: e.Settings,
		Records:  wroteRecords{records, p.wrote},
		Nodes:    nodes,
		Sampler:  probe.NewHost(e.Settings, "/", e.MetricsURL, ""),
		Clock:    p.clk,
	})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = cancel
	informed := make(chan struct{})
	go func() {
		defer close(informed)
		_ = nodes.Run(rctx)
	}()
	sctx, synced := context.WithTimeout(ctx, sampleWait)
	defer synced()
	if err := nodes.WaitForSync(sctx); err != nil {
		cancel()
		<-informed
		return nil, err
	}
	go func() {
		defer close(p.done)
		_ = loop.Run(rctx)
		<-informed
	}()
	if err := p.written(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Stop ends every process the fleet started and removes its files.
func (e *Env) Stop() {
	if e.API != nil {
		e.API.Stop()
	}
	if e.Etcd != nil {
		e.Etcd.Stop()
		for _, m := range e.Etcd.Members {
			os.RemoveAll(filepath.Dir(m.DataDir))
		}
	}
}

func ptr[T any](v T) *T { return &v }
