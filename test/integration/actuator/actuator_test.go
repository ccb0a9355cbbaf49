package actuator

// The actuator on a real kube-apiserver and a real three-member etcd
// cluster. etcdproc's members serve no TLS, so the actuator reaches its
// member's HTTP API (etcd's gRPC gateway, the one k3s serves with client
// certificates on 2382) over plain http: --etcd-endpoint=http://... takes
// no certificate; the client certificate path is tested against a TLS
// stand-in in internal/actuator (TestEtcdGatewayOverTLS).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/actuator"
	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

const (
	ns         = "fleet-role"
	node       = "x"
	actuatorSA = "fleet-role-actuator"
	planID     = "swap-x-s-test"
	// term is the Lease's leaseTransitions when the test begins.
	term = int32(5)
	// labDir is where the lab's supervisor and the actuator meet, on the
	// host (here under the test's host root).
	labDir = "/run/fleet-role-lab"
	// reportWait bounds the wait for a report: the actuator hears of the
	// journal by its watch at once; a restart's report waits out the
	// stand-in supervisor's restartTakes besides.
	reportWait = 30 * time.Second
	// restartTakes is how long the stand-in supervisor takes to "restart
	// k3s": long enough to see that no report is written before it is done.
	restartTakes = time.Second
)

type env struct {
	admin    kubernetes.Interface
	journals kube.ConfigMapClient // the journal, as the controller writes it
	asActor  kube.ConfigMapClient // the namespace's ConfigMaps, as the actuator
	leases   kube.Leases          // the Lease, as the controller holds it
	etcd     *etcdproc.Cluster
	local    *etcdproc.Member // the member on the actuator's host
	root     string           // the host root
	stateDir string
	kubecfg  string
	sup      *supervisor
	nodeUID  string
	journal  *acting.Journal
}

// setup installs fleet-role with acting (deploy/fleet-role-acting.yaml:
// the actuator's RBAC and the admission policy that holds its record to
// its shape) on a real API server, makes the actuator's Node, and gives
// the actuator a token of its ServiceAccount bound to a Pod on that Node,
// as the kubelet gives the DaemonSet's pod; the journal and the Lease are
// written with the controller's own ServiceAccount, the journal's one
// writer.
func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	etcd, err := etcdproc.Start(ctx, etcdproc.Config{Binary: testenv.Etcd(t), Dir: t.TempDir(), Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	c := testkit.StartActing(t)
	if c.Namespace != ns {
		t.Fatalf("the install's namespace is %s, the test's %s", c.Namespace, ns)
	}
	n, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := c.Client(t, testkit.ControllerSA)
	leases, err := ctrl.Leases(ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(ctx, controller.LeaseName, kube.LeaseRecord{Holder: "controller-a", LeaseDuration: controller.DefaultLeaseDuration,
		AcquireTime: time.Now(), RenewTime: time.Now(), Transitions: term}); err != nil {
		t.Fatal(err)
	}
	local, err := etcd.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{admin: c.Admin, journals: ctrl.ConfigMapClient(ns), leases: leases, etcd: etcd, local: local, root: t.TempDir(), stateDir: t.TempDir(),
		kubecfg: filepath.Join(t.TempDir(), "actuator.kubeconfig"), nodeUID: string(n.UID)}
	token := c.PodToken(t, actuatorSA, node)
	if err := c.Server.Kubeconfig(e.kubecfg, token); err != nil {
		t.Fatal(err)
	}
	e.asActor = c.ClientForToken(t, token).ConfigMapClient(ns)
	e.sup = startSupervisor(t, filepath.Join(e.root, labDir))
	e.journal = &acting.Journal{Schema: acting.JournalSchema, PlanID: planID, Phase: acting.PhaseRunning, Term: term, Started: time.Now().UTC(),
		Out: acting.Party{Node: node, MemberID: local.MemberID(), PeerURL: local.AdvertisePeerURL}, In: acting.Party{Node: "s"}, History: []acting.Event{}}
	for _, s := range acting.Steps {
		e.journal.Steps = append(e.journal.Steps, acting.JournalStep{Name: s, State: acting.StatePending})
	}
	return e
}

// run starts the actuator through the command line, in this process, and
// returns its stop, which waits for it to exit and checks it exited 0.
func (e *env) run(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out fleetbin.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.MainContext(ctx, []string{"actuator", "--kubeconfig", e.kubecfg, "--node", node, "--namespace", ns,
			"--host-root", e.root, "--state-dir", e.stateDir, "--k3s-restart=file:" + labDir,
			"--etcd-endpoint", e.local.ClientURL, "--sample-period=2s"}, &out, &out)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("actuator exited %d:\n%s", code, out.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("actuator did not stop in 30 s:\n%s", out.String())
			}
			if t.Failed() {
				t.Logf("actuator log:\n%s", out.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// command writes the journal with c as its command in phase p, as the
// controller does: a merge patch of the install's ConfigMap's data.
func (e *env) command(t *testing.T, p acting.Phase, c acting.Command) {
	t.Helper()
	e.journal.Phase, e.journal.Seq, e.journal.Command = p, c.Seq, &c
	doc, err := e.journal.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]string{acting.JournalKey: string(doc), acting.JournalPlanKey: planID, acting.JournalOutKey: node, acting.JournalPhaseKey: string(p)}
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.journals.Patch(context.Background(), acting.JournalConfigMap, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) cmd(seq int, v acting.Verb, target string, restart bool) acting.Command {
	return acting.Command{PlanID: planID, Seq: seq, Term: term, Host: node, Verb: v, Target: target, Restart: restart}
}

// record is the actuator's record, nil for none.
func (e *env) record(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	name, err := acting.ActuatorRecordName(node)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.admin.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func (e *env) report(t *testing.T) *acting.Report {
	t.Helper()
	cm := e.record(t)
	if cm == nil {
		return nil
	}
	var r acting.Report
	if err := json.Unmarshal([]byte(cm.Data[acting.ReportKey]), &r); err != nil {
		t.Fatalf("record's report: %v", err)
	}
	return &r
}

// waitReport waits for the report of seq at term tm and returns it.
func (e *env) waitReport(t *testing.T, seq int, tm int32) acting.Report {
	t.Helper()
	deadline := time.Now().Add(reportWait)
	for {
		if r := e.report(t); r != nil && r.PlanID == planID && r.Seq == seq && r.Term == tm {
			return *r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report of %s/%d at term %d in %v; the record holds %+v", planID, seq, tm, reportWait, e.report(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) dropIn(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, acting.DropInPath))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkShape holds the record to the shape the admission policy requires:
// its name, exactly the two labels, one ownerReference to its Node (not
// controller, not blocking its deletion), one data key, no annotations.
func (e *env) checkShape(t *testing.T) {
	t.Helper()
	cm := e.record(t)
	if cm == nil {
		t.Fatal("no record")
	}
	want := map[string]string{"fleet-role.io/record": "actuator", "app.kubernetes.io/part-of": "fleet-role"}
	if !maps.Equal(cm.Labels, want) {
		t.Errorf("labels %v, want %v", cm.Labels, want)
	}
	if len(cm.Annotations) != 0 {
		t.Errorf("annotations %v, want none", cm.Annotations)
	}
	if keys := slices.Collect(maps.Keys(cm.Data)); !reflect.DeepEqual(keys, []string{acting.ReportKey}) || len(cm.BinaryData) != 0 {
		t.Errorf("data keys %v, binaryData %d, want only %s", keys, len(cm.BinaryData), acting.ReportKey)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(e.nodeUID)}
	if len(cm.OwnerReferences) != 1 || !reflect.DeepEqual(cm.OwnerReferences[0], owner) {
		t.Errorf("owner references %+v, want one to Node %s (%s), neither controller nor blockOwnerDeletion", cm.OwnerReferences, node, e.nodeUID)
	}
	if cm.Name != acting.ActuatorRecordPrefix+node {
		t.Errorf("named %s", cm.Name)
	}
}

// supervisor stands in for the lab's k3s supervisor (lab/fleets/k3sfleet's
// supervisor.go, which really restarts k3s and is exercised with the
// actuator in test/acting): it waits for a new token in the request file,
// "restarts k3s" for restartTakes, and writes the same token to the done
// file, as the protocol fixes.
type supervisor struct {
	mu     sync.Mutex
	tokens []string
	doneAt []time.Time
}

func startSupervisor(t *testing.T, dir string) *supervisor {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		last := ""
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			b, err := os.ReadFile(filepath.Join(dir, actuator.RequestFile))
			token := strings.TrimSpace(string(b))
			if err != nil || token == "" || token == last {
				continue
			}
			last = token
			time.Sleep(restartTakes)
			tmp := filepath.Join(dir, ".done.tmp")
			if err := os.WriteFile(tmp, []byte(token+"\n"), 0o644); err != nil {
				t.Error(err)
				return
			}
			s.mu.Lock()
			s.tokens, s.doneAt = append(s.tokens, token), append(s.doneAt, time.Now())
			s.mu.Unlock()
			if err := os.Rename(tmp, filepath.Join(dir, actuator.DoneFile)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return s
}

func (s *supervisor) restarts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokens)
}

func TestActuator(t *testing.T) {
	e := setup(t)
	stop := e.run(t)
	ctx := context.Background()

	t.Run("etcd-on with a restart: the voter drop-in, k3s restarted, then the report", func(t *testing.T) {
		e.command(t, acting.PhaseRunning, e.cmd(1, acting.VerbEtcdOn, "", true))
		// No report before the supervisor says k3s started again.
		for e.sup.restarts() == nil {
			if r := e.report(t); r != nil && r.Seq == 1 {
				t.Fatalf("reported %+v before k3s was restarted", r)
			}
			time.Sleep(10 * time.Millisecond)
		}
		r := e.waitReport(t, 1, term)
		if !r.Done || r.Refused != "" || r.Error != "" {
			t.Fatalf("report %+v", r)
		}
		if got := e.dropIn(t); got != acting.DropInVoter {
			t.Errorf("drop-in %q, want the voter's", got)
		}
		if got := e.sup.restarts(); !slices.Equal(got, []string{actuator.RestartToken(planID, 1, term)}) {
			t.Errorf("restarts %v", got)
		}
		e.checkShape(t)
	})

	t.Run("etcd-off without a restart: the standby drop-in, k3s left alone", func(t *testing.T) {
		e.command(t, acting.PhaseRunning, e.cmd(2, acting.VerbEtcdOff, "", false))
		if r := e.waitReport(t, 2, term); !r.Done {
			t.Fatalf("report %+v", r)
		}
		if got := e.dropIn(t); got != acting.DropInStandby {
			t.Errorf("drop-in %q, want the standby's", got)
		}
		if got := e.sup.restarts(); len(got) != 1 {
			t.Errorf("restarts %v, want the first alone", got)
		}
	})

	var to *etcdproc.Member
	t.Run("move-leader hands etcd's leadership to the target", func(t *testing.T) {
		fs, err := e.etcd.Followers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		to = fs[0]
		e.command(t, acting.PhaseRunning, e.cmd(3, acting.VerbMoveLeader, to.MemberID(), false))
		if r := e.waitReport(t, 3, term); !r.Done {
			t.Fatalf("report %+v", r)
		}
		l, err := e.etcd.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l != to {
			t.Fatalf("leader %s (%s), want %s (%s)", l.Name, l.MemberID(), to.Name, to.MemberID())
		}
	})

	t.Run("move-leader when the local member does not lead: done, nothing moved", func(t *testing.T) {
		others := slices.DeleteFunc(slices.Clone(e.etcd.Members), func(m *etcdproc.Member) bool { return m == to || m == e.local })
		e.command(t, acting.PhaseRunning, e.cmd(4, acting.VerbMoveLeader, others[0].MemberID(), false))
		if r := e.waitReport(t, 4, term); !r.Done {
			t.Fatalf("report %+v", r)
		}
		if l, err := e.etcd.Leader(ctx); err != nil || l != to {
			t.Fatalf("leader %v (%v), want %s still", l, err, to.Name)
		}
	})

	t.Run("remove-member removes the newcomer, and refuses any other", func(t *testing.T) {
		learner, err := e.etcd.AddLearner(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.journal.In = acting.Party{Node: "s", PeerURL: learner.AdvertisePeerURL}
		// Not aborting: refused.
		e.command(t, acting.PhaseRunning, e.cmd(5, acting.VerbRemoveMember, learner.AdvertisePeerURL, false))
		if r := e.waitReport(t, 5, term); r.Done || !strings.HasPrefix(r.Refused, "not_aborting: ") {
			t.Fatalf("running: report %+v, want refused not_aborting", r)
		}
		// Aborting, a voter that is not the newcomer: refused.
		e.command(t, acting.PhaseAborting, e.cmd(6, acting.VerbRemoveMember, to.AdvertisePeerURL, false))
		if r := e.waitReport(t, 6, term); r.Done || !strings.HasPrefix(r.Refused, "not_newcomer: ") {
			t.Fatalf("another member: report %+v, want refused not_newcomer", r)
		}
		if n := members(t, e); n != 4 {
			t.Fatalf("%d members after the refusals, want 4", n)
		}
		// Aborting, the newcomer: removed.
		e.command(t, acting.PhaseAborting, e.cmd(7, acting.VerbRemoveMember, learner.AdvertisePeerURL, false))
		if r := e.waitReport(t, 7, term); !r.Done {
			t.Fatalf("newcomer: report %+v", r)
		}
		if n := members(t, e); n != 3 {
			t.Fatalf("%d members after the removal, want 3", n)
		}
	})

	t.Run("a stale term is refused and reported; its re-stamped copy is carried out", func(t *testing.T) {
		rec, rv, err := e.leases.Get(ctx, controller.LeaseName)
		if err != nil {
			t.Fatal(err)
		}
		rec.Holder, rec.Transitions = "controller-b", term+1
		if _, err := e.leases.Update(ctx, controller.LeaseName, rec, rv); err != nil {
			t.Fatal(err)
		}
		e.command(t, acting.PhaseRunning, e.cmd(8, acting.VerbEtcdOn, "", false))
		r := e.waitReport(t, 8, term)
		if r.Done || !strings.HasPrefix(r.Refused, "stale_term: ") {
			t.Fatalf("report %+v, want refused stale_term", r)
		}
		if got := e.dropIn(t); got != acting.DropInStandby {
			t.Fatalf("a stale command changed the drop-in: %q", got)
		}
		c := e.cmd(8, acting.VerbEtcdOn, "", false)
		c.Term = term + 1
		e.journal.Term = term + 1
		e.command(t, acting.PhaseRunning, c)
		if r := e.waitReport(t, 8, term+1); !r.Done {
			t.Fatalf("re-stamped: report %+v", r)
		}
		if got := e.dropIn(t); got != acting.DropInVoter {
			t.Fatalf("drop-in %q, want the voter's", got)
		}
	})

	t.Run("another host's command is left to it", func(t *testing.T) {
		before := e.record(t).ResourceVersion
		c := e.cmd(9, acting.VerbEtcdOff, "", true)
		c.Host, c.Term = "s", term+1
		e.command(t, acting.PhaseRunning, c)
		time.Sleep(2 * time.Second) // a retry round of --sample-period=2s
		if after := e.record(t).ResourceVersion; after != before {
			t.Fatalf("record written for another host's command: %+v", e.report(t))
		}
		if got := e.dropIn(t); got != acting.DropInVoter {
			t.Fatalf("drop-in %q", got)
		}
	})

	t.Run("the record is put back in its shape", func(t *testing.T) {
		// The admission policy is in force: the actuator's own token may
		// not give its record an annotation.
		name, _ := acting.ActuatorRecordName(node)
		_, err := e.asActor.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"by-hand":"yes"}}}`), metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no annotations") {
			t.Fatalf("the actuator annotating its record: %v, want refused by the admission policy", err)
		}
		// An administrator may; the actuator's next report puts the
		// record back in its shape.
		cm := e.record(t)
		cm.Annotations = map[string]string{"by-hand": "yes"}
		cm.Data["extra"] = "x"
		cm.Labels["extra"] = "x"
		if _, err := e.admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.command(t, acting.PhaseRunning, acting.Command{PlanID: planID, Seq: 10, Term: term + 1, Host: node, Verb: acting.VerbEtcdOn})
		e.waitReport(t, 10, term+1)
		e.checkShape(t)
	})

	t.Run("restarted, the actuator carries nothing out twice", func(t *testing.T) {
		c := acting.Command{PlanID: planID, Seq: 11, Term: term + 1, Host: node, Verb: acting.VerbEtcdOn, Restart: true}
		e.command(t, acting.PhaseRunning, c)
		if r := e.waitReport(t, 11, term+1); !r.Done {
			t.Fatalf("report %+v", r)
		}
		restarts := e.sup.restarts()
		stop()
		// The record lost too: the restarted actuator reports the
		// command done again from its local state, without restarting
		// k3s again.
		name, _ := acting.ActuatorRecordName(node)
		if err := e.admin.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.run(t)
		if r := e.waitReport(t, 11, term+1); !r.Done {
			t.Fatalf("after the restart: report %+v", r)
		}
		time.Sleep(restartTakes + 2*time.Second)
		if got := e.sup.restarts(); !slices.Equal(got, restarts) {
			t.Fatalf("restarts %v after the actuator's restart, want %v", got, restarts)
		}
		e.checkShape(t)
	})

	// Last: it removes the actuator's own member. A settle is armed at
	// once and restarts k3s only once that member is out of etcd, judged
	// on the local member alone: real etcd, removed, closes its client
	// port (the actuator's reads are then refused).
	t.Run("settle: armed, then k3s restarted once the local member is removed", func(t *testing.T) {
		e.run(t)
		before := len(e.sup.restarts())
		e.command(t, acting.PhaseRunning, acting.Command{PlanID: planID, Seq: 12, Term: term + 1, Host: node, Verb: acting.VerbSettle, Restart: true})
		if r := waitReportWhere(t, e, 12, "armed", func(r acting.Report) bool { return r.Armed || r.Done }); r.Done {
			t.Fatalf("settle reported done before the member's removal: %+v", r)
		}
		if got := len(e.sup.restarts()); got != before {
			t.Fatalf("k3s restarted %d times while the member is in", got-before)
		}
		id, err := actuator.ParseMemberID(e.local.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Through the other members: the local member, asked to remove
		// itself, may stop before it answers (CI saw "etcdserver: server
		// stopped" for a removal that committed).
		cli, err := e.etcd.ClientExcept(e.local)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		removedAt := time.Now()
		if _, err := cli.MemberRemove(rctx, id); err != nil {
			t.Fatalf("remove the local member %s: %v", e.local.ID, err)
		}
		waitReportWhere(t, e, 12, "done", func(r acting.Report) bool { return r.Done || r.Error != "" || r.Refused != "" })
		if r := e.report(t); !r.Done || r.Armed {
			t.Fatalf("report %+v, want done", r)
		}
		if got := len(e.sup.restarts()); got != before+1 {
			t.Fatalf("k3s restarted %d times once the member was removed, want once", got-before)
		}
		t.Logf("settle: k3s restarted and reported %.1f s after the member's removal", time.Since(removedAt).Seconds())
	})
}

// waitReportWhere waits, as waitReport does, for the record to report
// command seq as ok wants (what names it).
func waitReportWhere(t *testing.T, e *env, seq int, what string, ok func(acting.Report) bool) acting.Report {
	t.Helper()
	deadline := time.Now().Add(reportWait)
	for {
		if r := e.report(t); r != nil && r.PlanID == planID && r.Seq == seq && ok(*r) {
			return *r
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %d not reported %s in %v: record %+v", seq, what, reportWait, e.report(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// members counts the cluster's members, learners included.
func members(t *testing.T, e *env) int {
	t.Helper()
	cli, err := e.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range l.Members {
		names = append(names, fmt.Sprintf("%s(%x learner=%v)", m.Name, m.ID, m.IsLearner))
	}
	t.Logf("members: %s", strings.Join(names, " "))
	return len(l.Members)
}
