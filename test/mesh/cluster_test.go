package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/apiserver"
	"github.com/fleet-role/fleet-role/lab/etcdproc"
	"github.com/fleet-role/fleet-role/lab/netlab"
	"github.com/fleet-role/fleet-role/lab/probetest"
	"github.com/fleet-role/fleet-role/lab/proc"
	"github.com/fleet-role/fleet-role/lab/testenv"
)

// The hosts: three k3s servers, each with an etcd member, and one agent.
var (
	servers = []string{"server-1", "server-2", "server-3"}
	standby = "standby"
	hosts   = append(append([]string(nil), servers...), standby)
)

// pinnedHost is pinned, as an owner pins the first server of an inventory.
const pinnedHost = "server-1"

// fsyncSkipReason says why no host's disk is read: etcd's data and the
// standby's fsync directory are on tmpfs, so that this machine's disk does
// not decide the verdict (the fsync limit is held against a real disk by the
// fsync reading's own tests).
const fsyncSkipReason = "etcd data on tmpfs in the mesh scenario"

// settingsYAML is the scenario's settings file, passed with --settings to
// every process. k3s's etcd timing (FACTS.md); a short period and the
// smallest window the percentile allows (window >= 1/(1-p): 20 for p95), so
// that a window takes 40 s rather than 25 minutes.
//
// learner_stall_time is 10s rather than k3s's 5m: the cooldown (learner stall
// + one window) runs from the controller's first decision, and this scenario
// never adds a learner, so k3s's figure would only hold every swap back for
// five minutes; the decision core's own tests hold the cooldown itself.
const settingsYAML = `# fleet-role's settings for the mesh scenario (test/mesh).
election_timeout: 5s        # k3s sets etcd's --election-timeout=5000
heartbeat_interval: 500ms   # k3s sets etcd's --heartbeat-interval=500
tail_percentile: 0.95
window: 20                  # 1/(1-0.95): the fewest samples that give the p95 a sample of its own
sample_period: 2s
learner_stall_time: 10s     # no learner is ever added here; see the test
fsync_skip_reason: "` + fsyncSkipReason + `"
`

// startTimeout bounds each real component's start on a loaded 2-core machine.
const startTimeout = 3 * time.Minute

// mesh is the running scenario.
type mesh struct {
	dir          string
	bin          string // fleet-role, built from this checkout
	settings     settings.Settings
	settingsPath string

	lab        *netlab.Lab
	etcd       *etcdproc.Cluster
	api        *apiserver.Server
	admin      kubernetes.Interface
	adminKC    string
	kubectlBin string
	audit      string // the API server's audit log

	// probeTokens are the probes' tokens, each bound to a Pod on its host's
	// node (prepareProbes).
	probeTokens map[string]string
	probes      map[string]*proc.Proc
	controller  *proc.Proc
	// controllerURL serves the controller's /readyz.
	controllerURL string
	// observe, when set, sees every status waitFor reads, for what must
	// hold at every decision of a phase rather than at its end.
	observe func(*decide.Status)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fatal(t, err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fatalf(t, "the mesh scenario runs from test/mesh of the checkout: %v", err)
	}
	return root
}

// startMesh builds fleet-role and brings up the lab, etcd, the API server,
// the manifests and the Nodes. Every part is stopped in t.Cleanup in the
// reverse order of its start: processes before the lab.
func startMesh(t *testing.T) *mesh {
	t.Helper()
	etcdBin, kasBin := testenv.Etcd(t), testenv.KubeAPIServer(t)
	m := &mesh{dir: t.TempDir(), kubectlBin: testenv.Kubectl(t), probes: map[string]*proc.Proc{}}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	m.bin = filepath.Join(m.dir, "fleet-role")
	args := []string{"build", "-o", m.bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, "./cmd/fleet-role")...)
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		fatalf(t, "go build ./cmd/fleet-role: %v\n%s", err, out)
	}

	m.settingsPath = filepath.Join(m.dir, "settings.yaml")
	if err := os.WriteFile(m.settingsPath, []byte(settingsYAML), 0o644); err != nil {
		fatal(t, err)
	}
	s, err := settings.ReadFile(m.settingsPath, settings.Defaults())
	if err == nil {
		err = s.Validate()
	}
	if err != nil {
		fatalf(t, "the scenario's settings: %v", err)
	}
	m.settings = s

	lab, err := netlab.New(ctx, netlab.Config{Prefix: "mesh", Hosts: hosts, ConnectRoot: true})
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			errorf(t, "close the lab: %v", err)
		}
	})
	m.lab = lab
	t.Logf("lab: %s, hosts %s, root namespace at %s", lab.Subnet, hostAddrs(lab), lab.RootAddr)

	mem := mountTmpfs(t, filepath.Join(m.dir, "tmpfs"))
	etcdLog, err := os.Create(filepath.Join(m.dir, "etcd.log"))
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() { etcdLog.Close() })
	cl, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary:            etcdBin,
		Dir:               filepath.Join(mem, "etcd"),
		Members:           len(servers),
		HeartbeatInterval: s.HeartbeatInterval,
		ElectionTimeout:   s.ElectionTimeout,
		Name:              func(i int) string { return servers[i] },
		Host:              func(i int) string { return lab.Host(servers[i]).Addr.String() },
		Command: func(i int, name string, args []string) *exec.Cmd {
			return lab.Host(servers[i]).Command(context.Background(), name, withLoopbackMetrics(args)...)
		},
		Stdout:       etcdLog,
		StartTimeout: startTimeout,
	})
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(cl.Stop)
	m.etcd = cl
	m.moveLeader(t, ctx, pinnedHost)

	m.audit = filepath.Join(m.dir, "apiserver", "audit.log")
	policy := filepath.Join(m.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		fatal(t, err)
	}
	began := time.Now()
	api, err := apiserver.Start(ctx, apiserver.Config{
		Binary: kasBin,
		// k3s points each server's API server at its own member; this one
		// stands in for the pinned server's, which is never slowed or paused.
		EtcdServers: []string{cl.Members[0].ClientURL},
		Dir:         filepath.Join(m.dir, "apiserver"),
		BindAddress: lab.RootAddr.String(), // reachable from the hosts, and only there
		ExtraArgs:   []string{"--audit-policy-file=" + policy, "--audit-log-path=" + m.audit},
	})
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(api.Stop)
	m.api = api
	t.Logf("kube-apiserver ready at %s in %.1f s", api.URL, time.Since(began).Seconds())
	m.adminKC = filepath.Join(m.dir, "admin.kubeconfig")
	if err := api.Kubeconfig(m.adminKC, ""); err != nil {
		fatal(t, err)
	}
	m.admin, err = kubernetes.NewForConfig(api.AdminConfig())
	if err != nil {
		fatal(t, err)
	}

	// The manifests, applied as an operator would: the namespace, the
	// ServiceAccounts, their RBAC and the probes' admission policy, and the
	// status and settings ConfigMaps. (The Deployment and DaemonSet are
	// stored too; no kubelet runs them.)
	m.kubectl(t, ctx, "apply", "--server-side", "-f", filepath.Join(repoRoot(t), "deploy", "fleet-role.yaml"))

	m.registerNodes(t, ctx)
	return m
}

// auditPolicy records who did what to which object, for every request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

func hostAddrs(lab *netlab.Lab) string {
	var out []string
	for _, h := range lab.Hosts {
		out = append(out, h.Name+"="+h.Addr.String())
	}
	return strings.Join(out, " ")
}

// withLoopbackMetrics adds the host's own 127.0.0.1:2381 to a member's
// metrics listeners: k3s serves etcd's metrics there (FACTS.md, k3s), where
// the probe reads them, while etcdproc checks the member's health at its
// address from outside the host.
func withLoopbackMetrics(args []string) []string {
	out := append([]string(nil), args...)
	const flag = "--listen-metrics-urls="
	for i, a := range out {
		if strings.HasPrefix(a, flag) {
			out[i] = a + ",http://127.0.0.1:" + strconv.Itoa(etcdproc.StandardMetricsPort)
		}
	}
	return out
}

// mountTmpfs mounts a memory filesystem at dir until the test ends; the
// unmount is registered before any process that writes there starts, so it
// runs after they have stopped.
func mountTmpfs(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatal(t, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=2g,mode=0755"); err != nil {
		fatalf(t, "mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			errorf(t, "unmount %s: %v", dir, err)
		}
	})
	return dir
}

func (m *mesh) kubectl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, m.kubectlBin, append([]string{"--kubeconfig", m.adminKC}, args...)...).CombinedOutput()
	if err != nil {
		fatalf(t, "kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// renderedLabels runs `fleet-role render k3s-config` for a host and returns
// the labels its drop-in gives k3s (node-label+ entries, key=value).
func (m *mesh) renderedLabels(t *testing.T, ctx context.Context, eligible, pinned bool) map[string]string {
	t.Helper()
	out, err := exec.CommandContext(ctx, m.bin, "render", "k3s-config",
		"--eligible="+strconv.FormatBool(eligible), "--pinned="+strconv.FormatBool(pinned)).Output()
	if err != nil {
		fatalf(t, "fleet-role render k3s-config: %v", err)
	}
	var dropIn map[string][]string
	if err := yaml.Unmarshal(out, &dropIn); err != nil {
		fatalf(t, "parse the rendered drop-in: %v\n%s", err, out)
	}
	entries := dropIn["node-label+"]
	if len(entries) == 0 {
		fatalf(t, "the rendered drop-in has no node-label+ entries:\n%s", out)
	}
	labels := map[string]string{}
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			fatalf(t, "rendered node label %q is not key=value", e)
		}
		labels[k] = v
	}
	return labels
}

// registerNodes creates the Nodes as k3s would: every node's hostname, OS
// and InternalIP; on servers the etcd role label, the etcd annotations and
// the EtcdIsVoter condition; and on every host the labels fleet-role's
// drop-in prescribes (all eligible, the first pinned).
func (m *mesh) registerNodes(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, h := range m.lab.Hosts {
		labels := map[string]string{
			"kubernetes.io/hostname":           h.Name,
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/arch":               runtime.GOARCH,
			"node.kubernetes.io/instance-type": "k3s",
		}
		for k, v := range m.renderedLabels(t, ctx, true, h.Name == pinnedHost) {
			labels[k] = v
		}
		annotations := map[string]string{}
		var conds []corev1.NodeCondition
		if h.Name != standby {
			labels[decide.EtcdRoleLabel] = "true"
			labels["node-role.kubernetes.io/control-plane"] = "true"
			labels["node-role.kubernetes.io/master"] = "true"
			annotations["etcd.k3s.cattle.io/node-name"] = h.Name
			annotations[decide.NodeAddressAnnotation] = h.Addr.String()
			now := metav1.Now()
			conds = append(conds, corev1.NodeCondition{Type: decide.EtcdIsVoterCondition, Status: corev1.ConditionTrue,
				Reason: "MemberNotLearner", Message: "Node is a voting member of the etcd cluster",
				LastHeartbeatTime: now, LastTransitionTime: now})
		}
		status := corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: h.Addr.String()},
				{Type: corev1.NodeHostName, Address: h.Name},
			},
			Conditions: conds,
		}
		n, err := m.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: h.Name, Labels: labels, Annotations: annotations},
		}, metav1.CreateOptions{})
		if err != nil {
			fatalf(t, "register node %s: %v", h.Name, err)
		}
		// Status is its own subresource, as the kubelet writes it.
		n.Status = status
		if _, err := m.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			fatalf(t, "node %s status: %v", h.Name, err)
		}
	}
	got, err := m.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fatal(t, err)
	}
	nodes := decide.NodesFromKube(got.Items, m.settings)
	if len(nodes) != len(hosts) {
		fatalf(t, "%d nodes registered, want %d", len(nodes), len(hosts))
	}
	for _, n := range nodes {
		h := m.lab.Host(n.Name)
		wantVoter := n.Name != standby
		if n.Voter != wantVoter || !n.Eligible || n.Pinned != (n.Name == pinnedHost) || n.PeerAddress != h.Addr.String() {
			fatalf(t, "node %s reads %+v: want voter %v, eligible, pinned %v, peer address %s",
				n.Name, n, wantVoter, n.Name == pinnedHost, h.Addr)
		}
	}
}

// saKubeconfig issues a ServiceAccount's token and writes a kubeconfig
// holding it, with the API server at the lab's root address.
func (m *mesh) saKubeconfig(t *testing.T, ctx context.Context, sa string) string {
	t.Helper()
	tok, err := m.api.TokenFor(ctx, m.settings.Namespace, sa, time.Hour)
	if err != nil {
		fatal(t, err)
	}
	return m.writeKubeconfig(t, sa, tok)
}

func (m *mesh) writeKubeconfig(t *testing.T, name, token string) string {
	t.Helper()
	path := filepath.Join(m.dir, name+".kubeconfig")
	if err := m.api.Kubeconfig(path, token); err != nil {
		fatal(t, err)
	}
	return path
}

// ServiceAccounts of deploy/fleet-role.yaml.
const (
	probeSA      = probetest.ProbeSA
	controllerSA = probetest.ControllerSA
)

// prepareProbes gives every host's probe the credential the kubelet would
// give the DaemonSet's pod there: the admin creates a Pod of the probe's
// ServiceAccount with spec.nodeName set to the host's node (no kubelet runs
// it), and a token bound to that Pod carries the node in the user's extra,
// by which the admission policy holds the probe to that node's record. It
// runs before the snapshot: the Pods are the scenario's, not fleet-role's.
func (m *mesh) prepareProbes(t *testing.T) {
	t.Helper()
	c := &probetest.Cluster{Server: m.api, Admin: m.admin, Namespace: m.settings.Namespace}
	m.probeTokens = map[string]string{}
	for _, h := range hosts {
		m.probeTokens[h] = c.ProbeToken(t, h)
	}
}

// startComponents runs a probe inside every host's namespace, as the
// DaemonSet would with the host's network and a token bound to a Pod on the
// host's node, and the controller in the root namespace beside the API
// server with its ServiceAccount's token.
func (m *mesh) startComponents(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	controllerKC := m.saKubeconfig(t, ctx, controllerSA)
	fsyncRoot := filepath.Join(m.dir, "tmpfs", "fsync")

	for _, h := range m.lab.Hosts {
		fsyncDir := filepath.Join(fsyncRoot, h.Name)
		if err := os.MkdirAll(fsyncDir, 0o755); err != nil {
			fatal(t, err)
		}
		tok, ok := m.probeTokens[h.Name]
		if !ok {
			fatalf(t, "no probe token for %s: prepareProbes first", h.Name)
		}
		cmd := h.Command(context.Background(), m.bin, "probe",
			"--kubeconfig", m.writeKubeconfig(t, "probe-"+h.Name, tok),
			"--settings", m.settingsPath,
			"--node", h.Name,
			"--host-root", "/",
			"--fsync-dir", fsyncDir,
			"--metrics-url", fmt.Sprintf("http://127.0.0.1:%d/metrics", etcdproc.StandardMetricsPort),
			"--metrics-address", "127.0.0.1:9871", // the host's own loopback
		)
		m.probes[h.Name] = startProc(t, "probe on "+h.Name, cmd, filepath.Join(m.dir, "probe-"+h.Name+".log"))
	}
	cmd := exec.Command(m.bin, "controller",
		"--kubeconfig", controllerKC,
		"--settings", m.settingsPath,
		"--metrics-address", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), settings.EnvName("dry_run")+"=true")
	m.controller = startProc(t, "controller", cmd, filepath.Join(m.dir, "controller.log"))
}

// readyz asks the controller's /readyz, whose address its log names.
func (m *mesh) readyz(ctx context.Context) error {
	if m.controllerURL == "" {
		b, err := os.ReadFile(m.controller.Log)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving metrics" && rec.Address != "" {
				m.controllerURL = "http://" + rec.Address
			}
		}
		if m.controllerURL == "" {
			return fmt.Errorf("the controller's log names no metrics address")
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.controllerURL+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

// components lists every fleet-role process, for liveness checks and logs.
func (m *mesh) components() []*proc.Proc {
	var ps []*proc.Proc
	for _, h := range hosts {
		if p := m.probes[h]; p != nil {
			ps = append(ps, p)
		}
	}
	if m.controller != nil {
		ps = append(ps, m.controller)
	}
	return ps
}

// stopComponents stops the probes and the controller (SIGTERM: each writes
// what it holds) and fails when any exited other than by the signal.
func (m *mesh) stopComponents(t *testing.T) {
	t.Helper()
	for _, p := range m.components() {
		if gone, err := p.Exited(); gone {
			errorf(t, "%s had exited before the end (%v):\n%s", p.Name, err, tail(p.Log, 20))
			continue
		}
		p.Stop(stopGrace)
		if _, err := p.Exited(); err != nil {
			errorf(t, "%s after SIGTERM: %v\n%s", p.Name, err, tail(p.Log, 20))
		}
	}
}

// moveLeader makes the named member etcd's leader. k3s's first server
// starts the cluster alone and leads it when the others join; members
// started at once elect any of them. Which member leads changes what a slow
// voter costs: every write of the cluster waits for the leader's round trips,
// the probes' writes of their records included (see the README's
// mesh scenario section).
func (m *mesh) moveLeader(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var to *etcdproc.Member
	for _, mb := range m.etcd.Members {
		if mb.Name == name {
			to = mb
		}
	}
	for {
		leader, err := m.etcd.Leader(ctx)
		if err != nil {
			fatal(t, err)
		}
		if leader == to {
			t.Logf("etcd's leader is %s", name)
			return
		}
		id, err := strconv.ParseUint(to.MemberID(), 16, 64)
		if err != nil {
			fatalf(t, "member ID of %s: %v", name, err)
		}
		// Only the leader takes a transfer request.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			fatal(t, err)
		}
		_, err = cli.MoveLeader(ctx, id)
		cli.Close()
		if err != nil {
			if ctx.Err() != nil {
				fatalf(t, "move etcd's leadership from %s to %s: %v", leader.Name, name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
