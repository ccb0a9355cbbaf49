package k3s

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/bench"
	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fleets/cluster"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/image"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The hosts: three k3s servers, the first pinned (as an owner pins the
// first server of an inventory), and one agent as the standby.
var (
	servers = []string{"server-1", "server-2", "server-3"}
	standby = "standby"
	hosts   = append(append([]string(nil), servers...), standby)
)

const (
	pinnedHost = "server-1"
	pauseTag   = "fleet-role.test/pause:v1"
	namespace  = "fleet-role"
	// recordsNS holds the probes' records (settings records_namespace).
	recordsNS  = "fleet-role-records"
	probeSA    = testkit.ProbeSA
	ctrlSA     = testkit.ControllerSA
	probeLabel = "app.kubernetes.io/name=fleet-role-probe"
	ctrlLabel  = "app.kubernetes.io/name=fleet-role"
	// manifestPath is k3s's manifests directory on a server (k3s's
	// deploy controller applies what it finds there), as the README
	// tells an operator to install fleet-role.
	manifestPath = "/var/lib/rancher/k3s/server/manifests/fleet-role.yaml"
	// dropInPath is where the README puts `fleet-role render k3s-config`.
	dropInDir  = "/etc/rancher/k3s/config.yaml.d"
	dropInName = "fleet-role.yaml"
	// fsyncSkipReason: every host's /var/lib/rancher is a memory
	// filesystem of its own (lab/fleets/k3sfleet), so etcd's WAL and the
	// standby's disk reading are on tmpfs, and this machine's shared disk
	// does not decide the verdicts; the fsync reading's own tests hold the
	// disk limit on a real disk.
	fsyncSkipReason = "etcd data on tmpfs in the k3s scenario"
	// injected is the delay on every packet to and from the slowed voter,
	// each way: a connect to it takes at least 600 ms, past the connect
	// limit (election timeout / 20 = 250 ms at k3s's 5 s).
	injected = 300 * time.Millisecond
)

// settingsSubstitutions are what the scenario changes in
// deploy/fleet-role.yaml beside the image pull policy
// (testkit.LocalManifest), each for the reason given:
//
//   - the time, as every scenario with real pods compresses it
//     (testkit.CompressedTime: a full window in 40 s);
//   - learner_stall_time 30s rather than k3s's 5m: the cooldown (learner
//     stall + one window) runs from the voter set's last change, which on a
//     controller's first decision is the latest EtcdIsVoter transition
//     k3s wrote; at 5m the scenario would wait five minutes after the
//     cluster formed before any swap could be named. The decision core's
//     own tests hold the cooldown at its figure;
//   - fsync_skip_reason, see fsyncSkipReason.
var settingsSubstitutions = append(slices.Clone(testkit.CompressedTime),
	[2]string{"learner_stall_time: 5m ", "learner_stall_time: 30s "},
	[2]string{`fsync_skip_reason: "" `, `fsync_skip_reason: "` + fsyncSkipReason + `" `},
)

// Deadlines of the polls, each several times what the step takes on an
// idle machine; what a step must do within a bound is asserted apart, in
// periods.
const (
	applyTimeout    = 3 * time.Minute // k3s's deploy controller, then the pods' start
	baselineTimeout = 5 * time.Minute // a window (40 s) and the cooldown (70 s) from the last transition
	slowTimeout     = 3 * time.Minute
	recoverTimeout  = 5 * time.Minute // the slow samples leave the window
	pauseTimeout    = 2 * time.Minute
	pollEvery       = 250 * time.Millisecond
)

// auditPolicy: every write any user makes, and every request of
// fleet-role's ServiceAccounts (their lists and watches name the API server
// each component talks to). A watch is logged when its response starts.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:fleet-role"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// scenario is the running fleet with fleet-role installed.
type scenario struct {
	dir      string
	root     string
	bin      string // fleet-role, built for the host's own commands
	fleet    *k3sfleet.Fleet
	settings settings.Settings
	fig      figures
	// votersChangedAt is when the baseline's status dates the voter set.
	votersChangedAt time.Time
	// observe, when set, sees every status waitFor reads.
	observe func(*status.Status)
}

func TestK3s(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HoldHost(t)
	began := time.Now()
	s := &scenario{dir: t.TempDir(), root: testkit.RepoRoot(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// The tools first, so that a missing one fails before any build.
	k3sBin := testenv.K3s(t, s.root)
	testenv.Kubectl(t)
	k3sfleet.CheckHost(t)
	ver, err := exec.CommandContext(ctx, k3sBin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", k3sBin, err)
	}
	s.fig.k3sVersion = strings.TrimSpace(strings.SplitN(string(ver), "\n", 2)[0])
	t.Logf("k3s: %s (%s)", s.fig.k3sVersion, k3sBin)

	t0 := time.Now()
	frTar, pauseTar := filepath.Join(s.dir, "fleet-role.tar"), filepath.Join(s.dir, "pause.tar")
	if err := image.Build(ctx, s.root, image.FleetRole, testkit.ImageTag, frTar); err != nil {
		t.Fatal(err)
	}
	if err := image.Build(ctx, s.root, image.Pause, pauseTag, pauseTar); err != nil {
		t.Fatal(err)
	}
	s.bin = filepath.Join(s.dir, "fleet-role")
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./cmd/fleet-role")
	build.Dir = s.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleet-role: %v\n%s", err, out)
	}
	t.Logf("images and fleet-role built from the checkout in %.1f s", time.Since(t0).Seconds())

	step(t, "0. the fleet: k3s servers with their agents, and an agent, each with its containerd")
	dropIns := map[string]map[string][]byte{}
	for _, h := range hosts {
		dropIns[h] = map[string][]byte{dropInName: s.render(t, ctx, true, h == pinnedHost)}
	}
	s.fleet = k3sfleet.Start(t, k3sfleet.Config{
		Dir:         filepath.Join(s.dir, "fleet"),
		K3s:         k3sBin,
		Servers:     servers,
		Agents:      []string{standby},
		Token:       "fleet-role-k3s-scenario",
		PauseImage:  pauseTag,
		Images:      []string{frTar, pauseTar},
		DropIns:     dropIns,
		AuditPolicy: []byte(auditPolicy),
	})
	s.fig.firstServer, s.fig.formed = s.fleet.FirstServer, s.fleet.Formed
	t.Logf("fleet formed in %.1f s: every Node Ready and untainted, every server an etcd voter", s.fleet.Formed.Seconds())

	step(t, "1. what k3s put on its Nodes, as fleet-role reads it")
	before := s.snapshot(t, ctx)
	s.checkNodes(t, ctx, before)
	s.checkEtcdStart(t)
	if t.Failed() {
		t.FailNow()
	}

	step(t, "2. install: the rendered manifest into "+pinnedHost+"'s manifests directory")
	s.install(t, ctx)

	step(t, "3. RBAC and the admission policy, on k3s")
	s.checkRBAC(t, ctx)
	s.checkAdmission(t, ctx)

	step(t, "4. baseline: a full window from every host, every host fit, decision none")
	st := s.waitForBaseline(t)
	s.fig.baseline = time.Since(began)
	s.checkBaseline(t, ctx, st, before)
	s.checkRecords(t, ctx, before)
	s.checkMetricsPage(t, ctx)
	s.checkStatusPage(t, ctx)
	s.readMemory(t)
	if t.Failed() {
		t.FailNow()
	}

	target := s.chooseTarget(t, ctx)
	t.Run("slow-voter", func(t *testing.T) {
		step(t, fmt.Sprintf("5. slow voter: %v on every packet to and from %s", injected, target))
		s.waitForBaseline(t)
		s.slowVoter(t, target)
	})
	t.Run("paused-voter", func(t *testing.T) {
		step(t, "6. paused voter: every process of "+target+" frozen")
		s.waitForBaseline(t)
		s.pausedVoter(t, ctx, target)
	})

	step(t, "7. the etcd members and the Nodes unchanged; who wrote what")
	s.checkUnchanged(t, ctx, before)
	s.checkAudit(t)

	step(t, "8. the standby marked ineligible through its k3s configuration, as the README says")
	s.relabel(t, ctx)

	step(t, "9. uninstall as docs/install.md says; k3s restarted applies its manifests directory again")
	s.uninstall(t, ctx)
	for _, e := range s.fleet.Exited() {
		t.Errorf("a process of the fleet exited during the scenario: %s", e)
	}
	s.fig.total = time.Since(began)
	s.fig.log(t, s.settings)
}

func step(t *testing.T, what string) {
	t.Helper()
	t.Logf("== %s (%s)", what, time.Now().Format("15:04:05"))
}

// render is the k3s configuration drop-in `fleet-role render k3s-config`
// prints for a host: the README's way to label it, and the only way the
// scenario labels a Node (k3s passes it to the kubelet and sets it on the
// Node itself).
func (s *scenario) render(t *testing.T, ctx context.Context, eligible, pinned bool) []byte {
	t.Helper()
	out, err := exec.CommandContext(ctx, s.bin, "render", "k3s-config",
		"--eligible="+strconv.FormatBool(eligible), "--pinned="+strconv.FormatBool(pinned)).Output()
	if err != nil {
		t.Fatalf("fleet-role render k3s-config: %v", err)
	}
	return out
}

// install drops the manifest, as the scenario changes it, into the first
// server's manifests directory, and waits for k3s to apply it and for the
// pods to run: a probe on every host, the controller on one.
func (s *scenario) install(t *testing.T, ctx context.Context) {
	t.Helper()
	first := s.fleet.Host(servers[0])
	// k3s applies the manifests directory of the server holding its
	// leader lease (kube-system/k3s), whose holder is the server's
	// hostname: the first server took it when it started alone.
	holder := "(none)"
	if l, err := s.fleet.Admin.CoordinationV1().Leases("kube-system").Get(ctx, "k3s", metav1.GetOptions{}); err != nil {
		t.Logf("k3s's leader lease kube-system/k3s: %v", err)
	} else if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	s.fig.leaseHolder = holder
	t.Logf("k3s's leader lease kube-system/k3s is held by %s", holder)
	path := first.File(manifestPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	if err := os.WriteFile(path, testkit.LocalManifest(t, settingsSubstitutions), 0o644); err != nil {
		t.Fatal(err)
	}
	var applied time.Duration
	err := poll(ctx, applyTimeout, func() error {
		_, err := s.fleet.Admin.CoreV1().ConfigMaps(namespace).Get(ctx, "fleet-role-settings", metav1.GetOptions{})
		if err != nil {
			return err
		}
		applied = time.Since(written)
		return nil
	})
	if err != nil {
		t.Fatalf("k3s did not apply %s on %s (k3s's leader lease held by %s): %v", manifestPath, first.Name, holder, err)
	}
	s.fig.applied = applied
	t.Logf("k3s's deploy controller applied the manifest %.1f s after it was written", applied.Seconds())
	s.readSettings(t, ctx)

	var probes []corev1.Pod
	var ctrl *corev1.Pod
	err = poll(ctx, applyTimeout, func() error {
		var err error
		probes, err = s.readyPods(ctx, probeLabel)
		if err != nil {
			return err
		}
		on := map[string]bool{}
		for _, p := range probes {
			on[p.Spec.NodeName] = true
		}
		var missing []string
		for _, h := range hosts {
			if !on[h] {
				missing = append(missing, h)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no probe pod Ready on %s", strings.Join(missing, ", "))
		}
		cs, err := s.readyPods(ctx, ctrlLabel)
		if err != nil {
			return err
		}
		// Two replicas, one the Lease's holder (docs/status.md, One writer).
		if len(cs) != 2 {
			return fmt.Errorf("%d controller pods Ready, want 2", len(cs))
		}
		// On servers alone, never on the agent (deploy/base/controller.yaml:
		// the node affinity to the labels k3s gives its servers).
		for _, p := range cs {
			if !slices.Contains(servers, p.Spec.NodeName) {
				s.podStates(t, ctx)
				t.Fatalf("the controller pod %s runs on %s, not a server (%s)", p.Name, p.Spec.NodeName, strings.Join(servers, ", "))
			}
		}
		ctrl, err = s.leaderPod(ctx)
		return err
	})
	if err != nil {
		s.podStates(t, ctx)
		t.Fatal(err)
	}
	s.fig.podsReady = time.Since(written)
	t.Logf("every pod Running and Ready %.1f s after the manifest was written: the probe on every host, the controller %s on %s",
		s.fig.podsReady.Seconds(), ctrl.Name, ctrl.Spec.NodeName)
}

// readSettings reads the settings as the cluster holds them.
func (s *scenario) readSettings(t *testing.T, ctx context.Context) {
	t.Helper()
	s.settings = testkit.AppliedSettings(t, ctx, s.fleet.Admin, namespace, s.dir)
}

// readyPods lists the pods matching selector that are Running with every
// container Ready.
func (s *scenario) readyPods(ctx context.Context, selector string) ([]corev1.Pod, error) {
	l, err := s.fleet.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// leaderPod is the Ready controller pod that holds the Lease fleet-role,
// whose holder identity is the pod's name and a suffix: the one that
// decides and writes the status.
func (s *scenario) leaderPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := s.readyPods(ctx, ctrlLabel)
	if err != nil {
		return nil, err
	}
	l, err := s.fleet.Admin.CoordinationV1().Leases(namespace).Get(ctx, controller.LeaseName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	for i := range pods {
		if strings.HasPrefix(holder, pods[i].Name+"_") {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("no Ready controller pod holds the lease (holder %q, %d Ready)", holder, len(pods))
}

// podStates logs every pod of the namespace and the namespace's events,
// for a failure.
func (s *scenario) podStates(t *testing.T, ctx context.Context) {
	l, err := s.fleet.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range l.Items {
			var cs []string
			for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				switch {
				case c.State.Waiting != nil:
					cs = append(cs, c.Name+": waiting "+c.State.Waiting.Reason+" "+c.State.Waiting.Message)
				case c.State.Terminated != nil:
					cs = append(cs, fmt.Sprintf("%s: terminated %s exit %d", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode))
				default:
					cs = append(cs, fmt.Sprintf("%s: running, ready %v, restarts %d", c.Name, c.Ready, c.RestartCount))
				}
			}
			t.Logf("pod %s on %s: %s; %s", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(cs, "; "))
		}
	}
	ev, err := s.fleet.Admin.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range ev.Items {
			t.Logf("event %s %s/%s: %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// status reads the status document as the admin would.
func (s *scenario) status(ctx context.Context) (*status.Status, error) {
	cm, err := s.fleet.Admin.CoreV1().ConfigMaps(namespace).Get(ctx, s.settings.StatusConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, ok := cm.Data[status.StatusKey]
	if !ok {
		return nil, fmt.Errorf("%s has no %s yet", s.settings.StatusConfigMap, status.StatusKey)
	}
	return status.UnmarshalStatus([]byte(raw))
}

// waitFor polls the published status until cond accepts it, failing after
// timeout with what it waited for, why the last status did not do, and
// that status. Every process of the fleet must stay up.
func (s *scenario) waitFor(t *testing.T, what string, timeout time.Duration, cond func(*status.Status) error) *status.Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *status.Status
	var why error
	for {
		if ex := s.fleet.Exited(); len(ex) > 0 {
			t.Fatalf("waiting for %s: %s", what, strings.Join(ex, "\n"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := s.status(ctx)
		cancel()
		if err != nil {
			why = err
		} else {
			if line := statuscheck.Brief(st); last == nil || line != statuscheck.Brief(last) {
				t.Logf("%s %s", st.GeneratedAt.Format("15:04:05.000"), line)
			}
			last = st
			if s.observe != nil {
				s.observe(st)
			}
			if why = cond(st); why == nil {
				t.Logf("%s: status of %s", what, st.GeneratedAt.Format("15:04:05.000"))
				return st
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			if last != nil {
				_ = last.WriteTable(&b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			s.podStates(t, ctx)
			cancel()
			t.Fatalf("no %s within %v: %v\nlast status:\n%s", what, timeout, why, b.String())
		}
		time.Sleep(pollEvery)
	}
}

// watchDecisions has fn see, once each, the decisions generated from since
// on that waitFor reads, until stop is called or the test ends.
func (s *scenario) watchDecisions(t *testing.T, since time.Time, fn func(*status.Status)) (stop func()) {
	t.Helper()
	seen := map[time.Time]bool{}
	s.observe = func(st *status.Status) {
		if st.GeneratedAt.Before(since) || seen[st.GeneratedAt] {
			return
		}
		seen[st.GeneratedAt] = true
		fn(st)
	}
	stop = func() { s.observe = nil }
	t.Cleanup(stop)
	return stop
}

// waitForBaseline waits for every host fit with a full window and the
// cooldown passed, so that a fault's swap is not held back by it.
func (s *scenario) waitForBaseline(t *testing.T) *status.Status {
	t.Helper()
	return s.waitFor(t, "every host fit with a full window and nothing to replace", baselineTimeout, func(st *status.Status) error {
		if err := statuscheck.AllFit(st, hosts, s.settings); err != nil {
			return err
		}
		if r := statuscheck.DecisionReason(st, status.GateCooldown, ""); r == nil || !r.OK {
			return fmt.Errorf("the cooldown has not passed yet")
		}
		return nil
	})
}

func logStatus(t *testing.T, st *status.Status) {
	t.Helper()
	var b strings.Builder
	_ = st.WriteTable(&b)
	t.Logf("status of %s:\n%s", st.GeneratedAt.Format("15:04:05.000"), b.String())
}

// poll calls cond until it returns nil, within bound.
func poll(ctx context.Context, bound time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return cluster.WaitFor(ctx, "a condition within "+bound.String(), cond)
}

// figures are what the scenario measured, printed at its end.
type figures struct {
	k3sVersion          string
	firstServer, formed time.Duration
	applied, podsReady  time.Duration
	leaseHolder         string
	baseline            time.Duration
	pageBytes           int
	activePeers         string
	memory              []string // each host's k3s process at the baseline
	etcdVersion         string
	target              string
	targetWhy           string
	swapAfter           time.Duration
	swapPeriods         float64
	publishedAfter      time.Duration
	slowRestore         time.Duration
	slowDecisions       int
	staleAfter          time.Duration
	stalePeriods        float64
	staleReason         string
	alsoStale           []string
	pauseConditions     []string
	pausedFor           time.Duration
	k3sSawPause         time.Duration // zero when k3s's condition stayed True
	resumeAfter         time.Duration
	relabelled          time.Duration
	total               time.Duration
}

func (f figures) log(t *testing.T, s settings.Settings) {
	t.Helper()
	pn := "p" + settings.PercentileName(s.TailPercentile)
	var b strings.Builder
	fmt.Fprintf(&b, "k3s scenario figures (%s; sample_period %v, window %d, %s):\n", f.k3sVersion, s.SamplePeriod, s.Window, pn)
	fmt.Fprintf(&b, "  first server's API up %.1f s after its start; fleet formed (every Node Ready and untainted, every server a voter labelled control-plane) %.1f s after it\n", f.firstServer.Seconds(), f.formed.Seconds())
	fmt.Fprintf(&b, "  manifest applied by k3s (leader lease held by %s) %.1f s after it was written; every pod Ready after %.1f s\n", f.leaseHolder, f.applied.Seconds(), f.podsReady.Seconds())
	fmt.Fprintf(&b, "  baseline (all fit, cooldown passed) %.0f s after the start\n", f.baseline.Seconds())
	fmt.Fprintf(&b, "  k3s's etcd %s: metrics page %d bytes; etcd_network_active_peers %s\n", f.etcdVersion, f.pageBytes, f.activePeers)
	fmt.Fprintf(&b, "  k3s process memory at the baseline, resident now / peak so far: %s\n", strings.Join(f.memory, "; "))
	fmt.Fprintf(&b, "  faulted voter %s (%s)\n", f.target, f.targetWhy)
	if f.swapAfter > 0 {
		fmt.Fprintf(&b, "  slow voter: delay %v each way -> swap %s -> %s named after %.1f s = %.1f periods, published after %.1f s; %d decisions while delayed; fit again %.1f s after the delay was removed\n",
			injected, f.target, standby, f.swapAfter.Seconds(), f.swapPeriods, f.publishedAfter.Seconds(), f.slowDecisions, f.slowRestore.Seconds())
	} else {
		b.WriteString("  slow voter: did not complete\n")
	}
	if f.staleAfter > 0 {
		fmt.Fprintf(&b, "  paused voter: would not act after %.1f s = %.1f periods (%s)", f.staleAfter.Seconds(), f.stalePeriods, f.staleReason)
		if len(f.alsoStale) > 0 {
			fmt.Fprintf(&b, "; also reported not reporting meanwhile: %s", strings.Join(f.alsoStale, ", "))
		}
		fmt.Fprintf(&b, "; held %.0f s", f.pausedFor.Seconds())
		if f.k3sSawPause > 0 {
			fmt.Fprintf(&b, " (k3s turned its %s from True after %.0f s)", k3sfleet.EtcdIsVoter, f.k3sSawPause.Seconds())
		} else {
			fmt.Fprintf(&b, " (k3s's %s stayed True)", k3sfleet.EtcdIsVoter)
		}
		fmt.Fprintf(&b, "; every host fit again %.1f s after the thaw\n", f.resumeAfter.Seconds())
		if len(f.pauseConditions) > 0 {
			fmt.Fprintf(&b, "    %s while paused and after: %s\n", k3sfleet.EtcdIsVoter, strings.Join(f.pauseConditions, "; "))
		}
	} else {
		b.WriteString("  paused voter: did not complete\n")
	}
	if f.relabelled > 0 {
		fmt.Fprintf(&b, "  standby's drop-in --eligible=false, k3s agent restarted: label false after %.1f s\n", f.relabelled.Seconds())
	}
	fmt.Fprintf(&b, "  whole scenario %.0f s\n", f.total.Seconds())
	t.Log(b.String())
}

// readMemory notes each host's k3s process's resident memory (VmRSS) and
// its peak (VmHWM) at the baseline: k3s with fleet-role running, every
// server's etcd, API server, controllers and kubelet in one process, an
// agent's kubelet and kube-proxy. A figure, not a limit: memory is judged
// in benchmarks, never here.
func (s *scenario) readMemory(t *testing.T) {
	t.Helper()
	for _, name := range hosts {
		m, err := bench.ReadMemory(s.fleet.Host(name).K3s().PID())
		if err != nil {
			t.Errorf("%s's k3s memory: %v", name, err)
			continue
		}
		s.fig.memory = append(s.fig.memory, fmt.Sprintf("%s %d / %d MiB", name, m.RSS>>20, m.HWM>>20))
	}
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
