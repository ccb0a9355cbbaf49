package k3s

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/auditlog"
	"github.com/fleet-role/fleet-role/lab/kit/metricscrape"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// What k3s writes on a server's Node that fleet-role reads, by k3s's own
// names (pkg/etcd/etcd.go, pkg/util/labels.go); decide's constants must
// match them.
const (
	k3sEtcdRoleLabel   = "node-role.kubernetes.io/etcd"
	k3sNameAnnotation  = "etcd.k3s.cattle.io/node-name"
	k3sAddrAnnotation  = "etcd.k3s.cattle.io/node-address"
	k3sVoterReason     = "MemberNotLearner"
	k3sVoterMessage    = "Node is a voting member of the etcd cluster"
	k3sMetricsLoopback = "http://127.0.0.1:2381/metrics"
)

// snapshot is what fleet-role must never change: the etcd membership and
// what k3s put on the Nodes (labels, annotations, taints), but for the
// times k3s itself writes on them as it runs (k3sClock).
//
// That fleet-role changes no Node at all is the audit check's (no Node
// write by its ServiceAccounts, nor by the scenario's own credential).
type snapshot struct {
	members []member
	nodes   map[string]nodeView
}

// k3sClock are the annotations k3s rewrites on a server's Node as it runs:
// when its etcd snapshot controller last reconciled the snapshots on the
// node's disk and on S3 (pkg/etcd/snapshot.go, annotationLocalReconciled
// and annotationS3Reconciled), at each start of that controller.
var k3sClock = []string{
	"etcd.k3s.cattle.io/local-snapshots-timestamp",
	"etcd.k3s.cattle.io/s3-snapshots-timestamp",
}

type member struct {
	ID        uint64
	Name      string
	PeerURLs  []string
	IsLearner bool
}

type nodeView struct {
	Labels, Annotations map[string]string
	Taints              []corev1.Taint
}

func (s *scenario) snapshot(t *testing.T, ctx context.Context) snapshot {
	t.Helper()
	cli, err := s.fleet.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var snap snapshot
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ml, err := cli.MemberList(cctx)
	if err != nil {
		t.Fatalf("etcd member list with k3s's client certificate: %v", err)
	}
	for _, x := range ml.Members {
		snap.members = append(snap.members, member{x.ID, x.Name, slices.Sorted(slices.Values(x.PeerURLs)), x.IsLearner})
	}
	slices.SortFunc(snap.members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	nodes, err := s.fleet.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap.nodes = map[string]nodeView{}
	for _, n := range nodes.Items {
		ann := maps.Clone(n.Annotations)
		for _, k := range k3sClock {
			delete(ann, k)
		}
		snap.nodes[n.Name] = nodeView{n.Labels, ann, n.Spec.Taints}
	}
	return snap
}

// memberOf is the etcd member whose peer URL is at the host's address.
func (snap snapshot) memberOf(addr string) *member {
	for i := range snap.members {
		for _, u := range snap.members[i].PeerURLs {
			if u == "https://"+addr+":2380" {
				return &snap.members[i]
			}
		}
	}
	return nil
}

// checkNodes holds what k3s put on each Node against what fleet-role reads
// (kube.NodesFromKube): on a server, k3s's etcd role label, its two etcd
// annotations naming the member and its peer address, and its EtcdIsVoter
// condition True/MemberNotLearner, whose transition time fleet-role takes
// as the voter's since; on the agent none of them; on every host the two
// labels of its fleet-role drop-in, set by k3s from its configuration.
func (s *scenario) checkNodes(t *testing.T, ctx context.Context, snap snapshot) {
	t.Helper()
	if k3snode.EtcdRoleLabel != k3sEtcdRoleLabel || k3snode.NodeAddressAnnotation != k3sAddrAnnotation || k3snode.EtcdIsVoterCondition != k3sfleet.EtcdIsVoter {
		t.Errorf("fleet-role reads %s, %s and %s; k3s writes %s, %s and %s",
			k3snode.EtcdRoleLabel, k3snode.NodeAddressAnnotation, k3snode.EtcdIsVoterCondition, k3sEtcdRoleLabel, k3sAddrAnnotation, k3sfleet.EtcdIsVoter)
	}
	if len(snap.members) != len(servers) {
		t.Errorf("etcd has %d members, want %d: %+v", len(snap.members), len(servers), snap.members)
	}
	l, err := s.fleet.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The shipped label keys: the drop-ins were rendered with them.
	st := settings.Defaults()
	read := map[string]k3snode.Node{}
	for _, n := range kube.NodesFromKube(l.Items, st) {
		read[n.Name] = n
	}
	for _, k := range l.Items {
		h := s.fleet.Host(k.Name)
		n := read[k.Name]
		var cond *corev1.NodeCondition
		for i, c := range k.Status.Conditions {
			if string(c.Type) == k3sfleet.EtcdIsVoter {
				cond = &k.Status.Conditions[i]
			}
		}
		wantPinned := k.Name == pinnedHost
		if got := k.Labels[st.EligibleLabel]; got != "true" {
			t.Errorf("%s: label %s=%q, want true from its drop-in", k.Name, st.EligibleLabel, got)
		}
		if got := k.Labels[st.PinnedLabel]; got != strconv.FormatBool(wantPinned) {
			t.Errorf("%s: label %s=%q, want %v from its drop-in", k.Name, st.PinnedLabel, got, wantPinned)
		}
		if !n.Eligible || !n.EligibleMarked || n.Pinned != wantPinned {
			t.Errorf("%s reads eligible %v (marked %v), pinned %v: want eligible, pinned %v", k.Name, n.Eligible, n.EligibleMarked, n.Pinned, wantPinned)
		}
		if !h.Server {
			if _, ok := k.Labels[k3sEtcdRoleLabel]; ok || cond != nil || k.Annotations[k3sAddrAnnotation] != "" {
				t.Errorf("%s, an agent, carries etcd's role label, address annotation or %s condition", k.Name, k3sfleet.EtcdIsVoter)
			}
			if n.Voter || n.Learner {
				t.Errorf("%s, an agent, reads as voter %v, learner %v", k.Name, n.Voter, n.Learner)
			}
			t.Logf("%s (agent): labels %s=%s %s=%s, no etcd role, no %s; fleet-role reads a standby",
				k.Name, st.EligibleLabel, k.Labels[st.EligibleLabel], st.PinnedLabel, k.Labels[st.PinnedLabel], k3sfleet.EtcdIsVoter)
			continue
		}
		m := snap.memberOf(h.Addr.String())
		switch {
		case k.Labels[k3sEtcdRoleLabel] != "true":
			t.Errorf("%s: label %s=%q, want true", k.Name, k3sEtcdRoleLabel, k.Labels[k3sEtcdRoleLabel])
		case k.Annotations[k3sAddrAnnotation] != h.Addr.String():
			t.Errorf("%s: annotation %s=%q, want its address %s", k.Name, k3sAddrAnnotation, k.Annotations[k3sAddrAnnotation], h.Addr)
		case m == nil:
			t.Errorf("%s: no etcd member's peer URL is at https://%s:2380", k.Name, h.Addr)
		case k.Annotations[k3sNameAnnotation] != m.Name:
			t.Errorf("%s: annotation %s=%q, etcd's member there is named %q", k.Name, k3sNameAnnotation, k.Annotations[k3sNameAnnotation], m.Name)
		case cond == nil:
			t.Errorf("%s: no %s condition", k.Name, k3sfleet.EtcdIsVoter)
		case cond.Status != corev1.ConditionTrue || cond.Reason != k3sVoterReason || cond.Message != k3sVoterMessage:
			t.Errorf("%s: %s %s/%s %q, want True/%s %q", k.Name, k3sfleet.EtcdIsVoter, cond.Status, cond.Reason, cond.Message, k3sVoterReason, k3sVoterMessage)
		case !n.Voter || n.Learner || n.PeerAddress != h.Addr.String() || !n.VoterForKnown || n.VoterFor != max(0, cond.LastHeartbeatTime.Sub(cond.LastTransitionTime.Time)):
			t.Errorf("%s reads %+v: want a voter, not a learner, peer address %s, a voter for %v at k3s's heartbeat (%s less %s)", k.Name, n, h.Addr,
				max(0, cond.LastHeartbeatTime.Sub(cond.LastTransitionTime.Time)), cond.LastHeartbeatTime.UTC(), cond.LastTransitionTime.UTC())
		default:
			t.Logf("%s: %s=true; %s=%s (etcd member %x), %s=%s; %s True/%s since %s; labels %s=%s %s=%s",
				k.Name, k3sEtcdRoleLabel, k3sNameAnnotation, m.Name, m.ID, k3sAddrAnnotation, h.Addr,
				k3sfleet.EtcdIsVoter, cond.Reason, cond.LastTransitionTime.UTC().Format(time.RFC3339),
				st.EligibleLabel, k.Labels[st.EligibleLabel], st.PinnedLabel, k.Labels[st.PinnedLabel])
		}
		for _, mf := range k.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:`+st.EligibleLabel+`"`) {
				t.Logf("%s: label %s written by field manager %q (%s)", k.Name, st.EligibleLabel, mf.Manager, mf.Operation)
			}
		}
	}
	if len(l.Items) != len(hosts) {
		t.Errorf("%d Nodes, want %d", len(l.Items), len(hosts))
	}
	// The transitions k3s wrote while the cluster formed: a joining
	// server's member is a learner until k3s's leader promotes it.
	for _, tr := range s.fleet.Transitions {
		t.Logf("seen while forming: %s %s %s/%s at %s", tr.Node, k3sfleet.EtcdIsVoter, tr.Status, tr.Reason, tr.LastTransitionTime.UTC().Format(time.RFC3339))
	}
}

// checkEtcdStart reads the line etcd logs as it starts inside each
// server's k3s ("starting an etcd server"): the heartbeat interval and
// election timeout k3s gives it, which the shipped settings must name (every
// limit derives from them), its metrics listeners (127.0.0.1:2381, where
// the probe reads, and the node's address with --etcd-expose-metrics), and
// the etcd release k3s embeds.
func (s *scenario) checkEtcdStart(t *testing.T) {
	t.Helper()
	d := settings.Defaults()
	for _, name := range servers {
		h := s.fleet.Host(name)
		b, err := os.ReadFile(h.K3s().Log)
		if err != nil {
			t.Fatal(err)
		}
		var start struct {
			Version    string   `json:"etcd-version"`
			Heartbeat  string   `json:"heartbeat-interval"`
			Election   string   `json:"election-timeout"`
			MetricURLs []string `json:"listen-metrics-urls"`
			PeerURLs   []string `json:"listen-peer-urls"`
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"msg":"starting an etcd server"`) {
				if err := json.Unmarshal([]byte(line), &start); err != nil {
					t.Fatalf("%s: etcd's start line: %v", name, err)
				}
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no \"starting an etcd server\" line in k3s's log", name)
			continue
		}
		hb, herr := time.ParseDuration(start.Heartbeat)
		el, eerr := time.ParseDuration(start.Election)
		metrics := []string{"http://127.0.0.1:2381", "http://" + h.Addr.String() + ":2381"}
		switch {
		case herr != nil || eerr != nil || hb != d.HeartbeatInterval || el != d.ElectionTimeout:
			t.Errorf("%s: k3s started etcd with heartbeat %q and election timeout %q; fleet-role's settings ship %v and %v",
				name, start.Heartbeat, start.Election, d.HeartbeatInterval, d.ElectionTimeout)
		case !slices.Equal(start.MetricURLs, metrics):
			t.Errorf("%s: etcd's metrics listen on %v, want %v", name, start.MetricURLs, metrics)
		default:
			t.Logf("%s: k3s started etcd %s with heartbeat %s, election timeout %s, metrics on %s, peers on %s",
				name, start.Version, start.Heartbeat, start.Election, strings.Join(start.MetricURLs, " "), strings.Join(start.PeerURLs, " "))
		}
	}
}

// checkRBAC asks `kubectl auth can-i` as each ServiceAccount, on k3s, what
// deploy/base/rbac.yaml lets it do and what it must not: the Nodes read
// through informers and never changed; no Secret; the probe writes
// ConfigMaps of the records' namespace (the admission policy narrows that
// to its own record), lists none, and writes nothing in fleet-role's own;
// the controller lists the records and writes only the status. test/mesh
// asks the full design on a plain API server.
func (s *scenario) checkRBAC(t *testing.T, ctx context.Context) {
	t.Helper()
	qs := []struct {
		sa, verb, resource string
		want               bool
		ns                 string // fleet-role's namespace when empty
	}{
		{probeSA, "list", "nodes", true, ""}, {probeSA, "watch", "nodes", true, ""}, {probeSA, "patch", "nodes", false, ""},
		{probeSA, "get", "secrets", false, ""}, {probeSA, "create", "configmaps", true, recordsNS}, {probeSA, "patch", "configmaps/server-1", true, recordsNS},
		{probeSA, "list", "configmaps", false, recordsNS},
		{probeSA, "create", "configmaps", false, ""}, {probeSA, "patch", "configmaps/fleet-role-status", false, ""},
		{probeSA, "patch", "configmaps/fleet-role-settings", false, ""},
		{ctrlSA, "list", "nodes", true, ""}, {ctrlSA, "update", "nodes", false, ""}, {ctrlSA, "get", "secrets", false, ""},
		{ctrlSA, "list", "configmaps", true, recordsNS}, {ctrlSA, "patch", "configmaps/fleet-role-status", true, ""},
		{ctrlSA, "patch", "configmaps/server-1", false, recordsNS}, {ctrlSA, "create", "configmaps", false, recordsNS},
	}
	for _, q := range qs {
		as := "system:serviceaccount:" + namespace + ":" + q.sa
		// The answer on standard output; kubectl warns on standard error
		// that Nodes are not namespaced.
		cmd := exec.CommandContext(ctx, testenv.Kubectl(t), "--kubeconfig", s.fleet.AdminKC,
			"auth", "can-i", q.verb, q.resource, "-n", cmp.Or(q.ns, namespace), "--as", as)
		out, err := cmd.Output()
		answer := strings.TrimSpace(string(out))
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && answer == "no") {
			t.Fatalf("kubectl auth can-i %s %s --as %s: %v: %s", q.verb, q.resource, as, err, out)
		}
		if got := answer == "yes"; got != q.want {
			t.Errorf("%s can %s %s: %q, want %v", q.sa, q.verb, q.resource, answer, q.want)
		}
	}
	t.Logf("kubectl auth can-i: %d questions as the two ServiceAccounts answered as deploy/base/rbac.yaml says", len(qs))
}

// checkAdmission: the admission policy holds on k3s for the token k3s's
// kubelet issued to the probe pod on the pinned server (read from the
// pod's projected volume, in that host's own /var/lib/kubelet): it carries
// the node, may write its own record, and may not write another node's
// record or the status.
func (s *scenario) checkAdmission(t *testing.T, ctx context.Context) {
	t.Helper()
	pods, err := s.readyPods(ctx, probeLabel)
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName == pinnedHost {
			pod = &pods[i]
		}
	}
	if pod == nil {
		t.Fatalf("no probe pod on %s", pinnedHost)
	}
	tok := testkit.PodToken(t, s.fleet.Host(pinnedHost).File("/var/lib/kubelet"), pod)
	other, err := s.fleet.Admin.CoreV1().Nodes().Get(ctx, servers[1], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckProbePodToken(t, ctx, s.tokenConfig(tok), namespace, recordsNS, pod, record.Owner{Name: other.Name, UID: other.UID})
}

// admissionCheckAgent marks the requests checkAdmission makes with the
// probe's token, so that checkAudit, which holds every write the probes
// make, leaves them out.
const admissionCheckAgent = "fleet-role-k3s/admission-check"

// tokenConfig is the admin's connection to the first server with token as
// the credential instead of k3s's admin certificate.
func (s *scenario) tokenConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(s.fleet.AdminConfig)
	cfg.BearerToken = token
	cfg.UserAgent = admissionCheckAgent
	return cfg
}

// checkBaseline holds what the first all-fit status says: the roles and
// labels as k3s wrote them, the disk reading skipped for the settings'
// reason, and the voter set dated by k3s's EtcdIsVoter transitions (the
// controller's first decision had no earlier status: the cooldown runs
// from the latest transition, not from the controller's start).
func (s *scenario) checkBaseline(t *testing.T, ctx context.Context, st *status.Status, snap snapshot) {
	t.Helper()
	logStatus(t, st)
	if !st.DryRun {
		t.Errorf("the status is not a dry run")
	}
	for _, name := range hosts {
		h := statuscheck.HostOf(st, name)
		role := status.RoleVoter
		if name == standby {
			role = status.RoleStandby
		}
		if h.Role != role || !h.Eligible || h.Pinned != (name == pinnedHost) {
			t.Errorf("%s: role %s eligible %v pinned %v, want %s, eligible, pinned %v", name, h.Role, h.Eligible, h.Pinned, role, name == pinnedHost)
		}
	}
	var fs *status.Reason
	for i, r := range statuscheck.HostOf(st, standby).Reasons {
		if r.Signal == status.SignalFdatasync {
			fs = &statuscheck.HostOf(st, standby).Reasons[i]
		}
	}
	// Skipped for the setting (by the probe, which reads it too, or by the
	// decision before the probe's first window), and the reason quoted:
	// the operator's own words, which the status carries as data.
	skipped := fs != nil && (fs.Code == status.CodeSkippedByProbe || fs.Code == status.CodeSkippedBySetting)
	if !skipped || !fs.OK || !strings.Contains(fs.Detail, fsyncSkipReason) {
		t.Errorf("the standby's fdatasync reason does not say the disk reading is skipped because %q: %+v", fsyncSkipReason, fs)
	}

	l, err := s.fleet.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var latest time.Time
	for _, n := range l.Items {
		for _, c := range n.Status.Conditions {
			if string(c.Type) == k3sfleet.EtcdIsVoter && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(latest) {
				latest = c.LastTransitionTime.UTC()
			}
		}
	}
	ctrl, err := s.leaderPod(ctx)
	if err != nil {
		t.Fatalf("the controller pod that leads: %v", err)
	}
	started := ctrl.CreationTimestamp.UTC()
	got := st.Memory.VotersChangedAt.UTC()
	s.votersChangedAt = got
	// The first decision counts each condition's age at k3s's heartbeat of
	// it back from its own now: never before the latest transition, and
	// after it by no more than a heartbeat's age, which k3s keeps under
	// its heartbeatInterval (5 minutes), checked once a tick (15 s,
	// manageTickerTime), and a second for the write (the times are whole
	// seconds).
	const heartbeatAge = 5*time.Minute + 15*time.Second + time.Second
	if got.Before(latest) || got.After(latest.Add(heartbeatAge)) {
		t.Errorf("the voter set dates from %s; k3s's latest EtcdIsVoter transition to True is %s: want no earlier, and later by at most %v (the controller pod was created at %s)",
			got.Format(time.RFC3339Nano), latest.Format(time.RFC3339), heartbeatAge, started.Format(time.RFC3339))
	} else {
		r := statuscheck.DecisionReason(st, status.GateCooldown, "")
		t.Logf("the voter set dates from %s, %.1f s after k3s's latest EtcdIsVoter transition, %s, which came %.0f s before the controller pod was created; %s",
			got.Format(time.RFC3339Nano), got.Sub(latest).Seconds(), latest.Format(time.RFC3339), started.Sub(latest).Seconds(), status.Summary(*r))
	}
}

// checkRecords holds what each probe pod recorded, read from its record:
// on a server, the etcd member k3s runs there (its ID as etcd's member
// list gives it), read from k3s's metrics on 127.0.0.1:2381, with a
// leader, every other member connected and known, and exactly one leader
// among them; on every host, a connect to every voter's peer port with no
// failure.
func (s *scenario) checkRecords(t *testing.T, ctx context.Context, snap snapshot) {
	t.Helper()
	leaders := 0
	for _, name := range hosts {
		// As the controller reads it: with its tail, in the tail layout.
		raw, err := kube.NewRecordsFor(s.fleet.Admin.CoreV1().ConfigMaps(recordsNS), recordsNS).Get(ctx, name)
		if err != nil {
			t.Errorf("record %s: %v", name, err)
			continue
		}
		e, err := entry.Decode(raw)
		if err != nil {
			t.Errorf("record %s: %v", name, err)
			continue
		}
		last := e.Samples[len(e.Samples)-1]
		var connects []string
		for _, v := range servers {
			c, ok := last.Connect[v]
			switch {
			case v == name:
			case !ok:
				t.Errorf("%s's last sample has no connect to %s's peer port", name, v)
			case c.Err != "":
				t.Errorf("%s's connect to %s's peer port failed: %s", name, v, c.Err)
			default:
				connects = append(connects, fmt.Sprintf("%s %.2f ms", v, c.Seconds*1000))
			}
		}
		if len(last.Errors) > 0 {
			t.Errorf("%s's last sample records failed readings: %v", name, last.Errors)
		}
		h := s.fleet.Host(name)
		if !h.Server {
			if last.Etcd != nil {
				t.Errorf("%s, an agent, recorded an etcd reading: %+v", name, last.Etcd)
			}
			t.Logf("record %s: %d samples; connects %s; link %s (%s)", name, len(e.Samples), strings.Join(connects, ", "), last.Link.Interface, last.Link.Class)
			continue
		}
		m := snap.memberOf(h.Addr.String())
		x := last.Etcd
		switch {
		case x == nil || x.Err != "":
			t.Errorf("%s recorded no etcd reading from %s: %+v", name, k3sMetricsLoopback, x)
			continue
		case m == nil || x.MemberID != strconv.FormatUint(m.ID, 16):
			t.Errorf("%s read etcd member %s from %s; etcd's member there is %+v", name, x.MemberID, k3sMetricsLoopback, m)
		case !x.HasLeader || x.IsLearner || x.ConnectedPeers != len(servers)-1 || x.KnownPeers != len(servers)-1:
			t.Errorf("%s read has leader %v, learner %v, %d connected and %d known peers: want a leader, a voter, %d of each",
				name, x.HasLeader, x.IsLearner, x.ConnectedPeers, x.KnownPeers, len(servers)-1)
		}
		if x.IsLeader {
			leaders++
		}
		t.Logf("record %s: %d samples; etcd member %s (leader %v) read from k3s's %s, %d peers connected, %d known; connects %s; link %s (%s)",
			name, len(e.Samples), x.MemberID, x.IsLeader, k3sMetricsLoopback, x.ConnectedPeers, x.KnownPeers, strings.Join(connects, ", "), last.Link.Interface, last.Link.Class)
	}
	if leaders != 1 {
		t.Errorf("%d servers' probes read their member as etcd's leader, want 1", leaders)
	}
}

// ownSeries are the prefixes of the series etcd's own page holds: its own,
// and its Go runtime's, process's, gRPC server's and exporter's. Any other
// is another component's of the k3s process, served on the same page.
var ownSeries = []string{"etcd_", "go_", "process_", "grpc_", "promhttp_", "os_"}

// checkMetricsPage reads what k3s's etcd serves on each server's own
// address (--etcd-expose-metrics; the probe reads the same page on the
// loopback): its size against fleet-role's page cap, the etcd release k3s
// embeds, and etcd_network_active_peers as it is, which fleet-role counts
// as distinct Remote peers above zero, never a sum.
func (s *scenario) checkMetricsPage(t *testing.T, ctx context.Context) {
	t.Helper()
	var peers []string
	for _, name := range servers {
		h := s.fleet.Host(name)
		url := "http://" + h.Addr.String() + ":2381/metrics"
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		page, err := metricscrape.Fetch(rctx, nil, url)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		if page.Bytes > s.fig.pageBytes {
			s.fig.pageBytes = page.Bytes
		}
		var values []string
		for _, m := range page.Series("etcd_network_active_peers", nil) {
			values = append(values, strconv.FormatFloat(m.Value, 'g', -1, 64))
		}
		for _, m := range page.Series("etcd_server_version", nil) {
			s.fig.etcdVersion = m.Labels["server_version"]
		}
		// The bytes of series of the k3s process's other components, by
		// subsystem (the name up to its first underscore).
		others := map[string]int{}
		for _, fam := range page.Names() {
			if slices.ContainsFunc(ownSeries, func(p string) bool { return strings.HasPrefix(fam, p) }) {
				continue
			}
			n, err := page.TextBytes(fam)
			if err != nil {
				t.Errorf("%s: %v", url, err)
			}
			others[strings.SplitN(fam, "_", 2)[0]] += n
		}
		peers = append(peers, fmt.Sprintf("%s %s", name, strings.Join(values, ",")))
		var of []string
		total := 0
		for _, k := range sortedKeys(others) {
			of = append(of, fmt.Sprintf("%s %d", k, others[k]))
			total += others[k]
		}
		t.Logf("%s: %d bytes, etcd_network_active_peers %s; %d bytes of other components' series (%s)", url, page.Bytes, strings.Join(values, ","), total, strings.Join(of, ", "))
	}
	s.fig.activePeers = strings.Join(peers, "; ")
}

// checkUnchanged holds that fleet-role changed neither the etcd membership
// nor what k3s put on the Nodes, once every server is a voter again by
// k3s's condition (a paused server's may have turned False and back).
func (s *scenario) checkUnchanged(t *testing.T, ctx context.Context, before snapshot) {
	t.Helper()
	err := poll(ctx, time.Minute, func() error {
		l, err := s.fleet.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range l.Items {
			for _, c := range n.Status.Conditions {
				if string(c.Type) == k3sfleet.EtcdIsVoter && c.Status != corev1.ConditionTrue {
					return fmt.Errorf("%s: %s %s/%s", n.Name, c.Type, c.Status, c.Reason)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("every server a voter again by k3s's condition: %v", err)
	}
	// The faults made k3s's conditions change (a paused server's), not
	// the voter set: fleet-role's cooldown still dates from where it did.
	if st, err := s.status(ctx); err != nil {
		t.Error(err)
	} else if got := st.Memory.VotersChangedAt.UTC(); !got.Equal(s.votersChangedAt) {
		t.Errorf("the voter set now dates from %s; it dated from %s at the baseline", got.Format(time.RFC3339Nano), s.votersChangedAt.Format(time.RFC3339Nano))
	} else {
		t.Logf("the voter set still dates from %s", got.Format(time.RFC3339))
	}
	// A frozen server's Node may have turned NotReady and been tainted
	// unreachable meanwhile; k3s and the node controller put it back.
	var after snapshot
	var diff []string
	_ = poll(ctx, 90*time.Second, func() error {
		after = s.snapshot(t, ctx)
		if diff = diffNodes(before.nodes, after.nodes); len(diff) > 0 {
			return errors.New(strings.Join(diff, "; "))
		}
		return nil
	})
	if !reflect.DeepEqual(before.members, after.members) {
		t.Errorf("the etcd member list changed:\nbefore %+v\nafter  %+v", before.members, after.members)
	} else {
		t.Logf("etcd member list unchanged: %+v", after.members)
	}
	if len(diff) > 0 {
		t.Errorf("the Nodes changed:\n  %s", strings.Join(diff, "\n  "))
	} else {
		t.Logf("%d Nodes unchanged (labels, annotations, taints)", len(after.nodes))
	}
}

// diffNodes lists what differs between two views of the Nodes: a Node
// added or gone, a label or annotation added, changed or removed, the
// taints.
func diffNodes(before, after map[string]nodeView) []string {
	var out []string
	diff := func(node, what string, a, b map[string]string) {
		for _, k := range sortedKeys(a) {
			if v, ok := b[k]; !ok {
				out = append(out, fmt.Sprintf("%s: %s %s=%q removed", node, what, k, a[k]))
			} else if v != a[k] {
				out = append(out, fmt.Sprintf("%s: %s %s %q -> %q", node, what, k, a[k], v))
			}
		}
		for _, k := range sortedKeys(b) {
			if _, ok := a[k]; !ok {
				out = append(out, fmt.Sprintf("%s: %s %s=%q added", node, what, k, b[k]))
			}
		}
	}
	for _, n := range sortedKeys(before) {
		b, ok := after[n]
		if !ok {
			out = append(out, n+": gone")
			continue
		}
		a := before[n]
		diff(n, "label", a.Labels, b.Labels)
		diff(n, "annotation", a.Annotations, b.Annotations)
		if !reflect.DeepEqual(a.Taints, b.Taints) {
			out = append(out, fmt.Sprintf("%s: taints %v -> %v", n, a.Taints, b.Taints))
		}
	}
	for _, n := range sortedKeys(after) {
		if _, ok := before[n]; !ok {
			out = append(out, n+": added")
		}
	}
	return out
}

// readAudit calls fn with every event of every server's audit log, and
// the server's name.
func (s *scenario) readAudit(t *testing.T, fn func(server string, e auditlog.Event)) {
	t.Helper()
	for _, name := range servers {
		if err := auditlog.Read(s.fleet.Host(name).AuditLog, func(e auditlog.Event) { fn(name, e) }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// checkAudit reads the servers' audit logs: the scenario's own credential
// (k3s's admin) wrote no Node, so every label, annotation and condition
// fleet-role read is k3s's; and every write of fleet-role's components is
// one of its own ConfigMaps or, the controller's, an Event on a Node, the
// Lease fleet-role or the Endpoints of its page's Service: the controller
// patches the status (and its replicas create and update the Lease, and
// the leader applies the Endpoints), the probe of node X creates or patches the
// record named X (the admission check's requests with the probe's token and
// the probe's server-side dry runs aside).
func (s *scenario) checkAudit(t *testing.T) {
	t.Helper()
	prefix := "system:serviceaccount:" + namespace + ":"
	writes := map[string]int{}
	nodeWriters := map[string]int{}
	s.readAudit(t, func(server string, e auditlog.Event) {
		// A server-side dry run (the probe's check that the policy is
		// enforced, docs/records.md, Fail closed) changes nothing.
		if e.Stage != "ResponseComplete" || !e.IsWrite() || e.ObjectRef == nil || e.UserAgent == admissionCheckAgent || e.DryRun() {
			return
		}
		r, what := e.ObjectRef, e.What()
		if r.Resource == "nodes" {
			nodeWriters[e.User.Username]++
			if e.User.Username == "system:admin" {
				t.Errorf("the scenario's admin credential wrote a Node on %s: %s", server, what)
			}
		}
		var who, cm, tail string
		ns := namespace
		verbs := []string{"create", "patch"}
		switch e.User.Username {
		case prefix + ctrlSA:
			// Its replicas run for the Lease fleet-role (One writer).
			if r.Resource == "leases" && r.Namespace == namespace && r.Name == controller.LeaseName && (e.Verb == "create" || e.Verb == "update") {
				if e.Code() < 400 {
					writes["controller lease"]++
				}
				return
			}
			// The leader names its page in the Service's Endpoints
			// (docs/operators.md, The status page): a server-side apply.
			if r.Resource == "endpoints" && r.Namespace == namespace && r.Name == "fleet-role" && (e.Verb == "create" || e.Verb == "patch") {
				if e.Code() < 400 {
					writes["controller's page Endpoints"]++
				}
				return
			}
			if e.EventOnNode(hosts) {
				// Its Events on the Nodes (docs/operators.md).
				if e.Code() < 400 {
					writes["controller's Events"]++
				}
				return
			}
			who, cm, verbs = "controller", s.settings.StatusConfigMap, []string{"patch"}
		case prefix + probeSA:
			nodes := e.User.Extra[record.NodeNameClaim]
			if len(nodes) != 1 {
				t.Errorf("a probe with node claim %q wrote: %s", nodes, what)
				return
			}
			who, cm, ns = "probe on "+nodes[0], record.Name(nodes[0]), recordsNS
			// And its tail, in the tail layout (docs/records.md, "Layouts").
			tail, _ = record.TailName(nodes[0])
		default:
			return
		}
		if r.Resource != "configmaps" || r.Namespace != ns || (r.Name != cm && (tail == "" || r.Name != tail)) || r.Subresource != "" || !slices.Contains(verbs, e.Verb) {
			t.Errorf("%s wrote something other than a %s of ConfigMap %s/%s on %s: %s", who, strings.Join(verbs, " or "), ns, cm, server, what)
			return
		}
		if e.Code() < 400 {
			writes[who]++
		}
	})
	for _, w := range append([]string{"controller"}, prefixed("probe on ", hosts)...) {
		if writes[w] == 0 {
			t.Errorf("%s never wrote its ConfigMap", w)
		}
	}
	var ws []string
	for _, u := range sortedKeys(nodeWriters) {
		ws = append(ws, fmt.Sprintf("%s %d", u, nodeWriters[u]))
	}
	t.Logf("audit: Node writes by %s; fleet-role's writes, each of its own ConfigMap: %v", strings.Join(ws, ", "), writes)
}

func prefixed(p string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, p+n)
	}
	return out
}

// checkStatusPage holds that on k3s the Service fleet-role reaches the
// leader's status page through the API server's service proxy (the path
// docs/operators.md gives for kubectl proxy): its Endpoints name the Pod
// that holds the Lease, and the page answers 200, which only a leader's
// does.
func (s *scenario) checkStatusPage(t *testing.T, ctx context.Context) {
	t.Helper()
	start := time.Now()
	var named string
	testkit.Eventually(t, time.Minute, func() error { return s.pageThroughService(ctx, &named) })
	t.Logf("the Service fleet-role reaches the leader %s's status page (%.1f s)", named, time.Since(start).Seconds())
}

// pageThroughService is nil once the Service's Endpoints name the leader
// and its page answers through the Service; named is then the leader.
func (s *scenario) pageThroughService(ctx context.Context, named *string) error {
	ctrl, err := s.leaderPod(ctx)
	if err != nil {
		return err
	}
	ep, err := s.fleet.Admin.CoreV1().Endpoints(namespace).Get(ctx, "fleet-role", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if a := kube.PageAddressOf(ep); a.Pod != ctrl.Name || a.IP != ctrl.Status.PodIP {
		return fmt.Errorf("the Service's Endpoints hold %+v, want the leader %s at %s alone", ep.Subsets, ctrl.Name, ctrl.Status.PodIP)
	}
	body, err := s.fleet.Admin.CoreV1().Services(namespace).ProxyGet("http", "fleet-role", kube.PagePortName, statuspage.Path, nil).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s through the Service: %w (%.200s)", statuspage.Path, err, body)
	}
	if !strings.Contains(string(body), "<html") {
		return fmt.Errorf("the page through the Service is no HTML page: %.200s", body)
	}
	*named = ctrl.Name
	return nil
}
