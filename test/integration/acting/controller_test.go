package acting_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// fleet is four hosts on the real API server, three voters and a
// control-plane-only standby, whose probes run in-process with samplers of
// the test's own. k3s is played by the test: it changes a Node as k3s
// would (the etcd label, EtcdIsVoter, the remove annotation) and the
// actuators' reports as an actuator would write them, with the actuator's
// own Pod-bound token. That k3s and the actuator do what is played here is
// test/acting's to hold, on real k3s; what this test holds is the
// controller's side: that it reads, writes and resumes a swap on a real
// API server under the acting install's RBAC and admission.
type fleet struct {
	t    *testing.T
	c    *testkit.Cluster
	s    settings.Settings
	ctx  context.Context
	slow sync.Map // node -> bool: its paths to every other host slow
	// members is how many members etcd has, as its voters' samples say
	// (etcd_network_known_peers): a learner shows on no Node on k3s.
	members atomic.Int32
}

const slowConnect = 0.5 // seconds: past the connect limit k3s's 5 s election timeout gives

func (f *fleet) node(name string, voter, joined, server bool, addr string) *corev1.Node {
	n := testkit.Node{Name: name, Voter: voter, Eligible: true, Address: addr}.Kubelet(time.Now().Add(-2*time.Hour), time.Now())
	args := `["server","--cluster-init"]`
	if joined {
		args = `["server","--server","https://127.0.22.1:6443"]`
	}
	n.Annotations[k3snode.NodeArgsAnnotation] = args
	if server {
		n.Labels[k3snode.ControlPlaneLabel] = "true"
	}
	return n
}

func (f *fleet) add(n *corev1.Node) {
	f.t.Helper()
	created, err := f.c.Admin.CoreV1().Nodes().Create(f.ctx, n, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	created.Status = n.Status
	if _, err := f.c.Admin.CoreV1().Nodes().UpdateStatus(f.ctx, created, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// sample is a fit sample, but for the slow hosts' paths, with etcd's
// figures on a member: its ID, and the leadership on server-1.
func (f *fleet) sample(node string) func(probe.Plan, int, time.Time) entry.Sample {
	return func(plan probe.Plan, seq int, at time.Time) entry.Sample {
		x := testkit.Fit(plan, seq, at)
		_, slowSelf := f.slow.Load(node)
		for peer := range x.Connect {
			if _, slowPeer := f.slow.Load(peer); slowSelf || slowPeer {
				x.Connect[peer] = entry.Connect{Seconds: slowConnect}
			}
		}
		if x.Etcd != nil {
			x.Etcd.MemberID = testkit.MemberID(node)
			x.Etcd.IsLeader = node == "server-1"
			x.Etcd.KnownPeers = int(f.members.Load()) - 1
		}
		return x
	}
}

// patchNode changes a Node as k3s would: labels and annotations (nil
// removes), and its EtcdIsVoter condition when voter is set.
func (f *fleet) patchNode(name string, labels, annotations map[string]*string, voter *bool) {
	f.t.Helper()
	meta := map[string]any{}
	if labels != nil {
		meta["labels"] = labels
	}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	if len(meta) > 0 {
		// A key set to null in a merge patch removes it: a nil map here
		// must be left out, or it would remove them all.
		body, _ := json.Marshal(map[string]any{"metadata": meta})
		if _, err := f.c.Admin.CoreV1().Nodes().Patch(f.ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			f.t.Fatalf("patch node %s: %v", name, err)
		}
	}
	if voter == nil {
		return
	}
	n, err := f.c.Admin.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	st, reason := corev1.ConditionFalse, "MemberIsLearner"
	if *voter {
		st, reason = corev1.ConditionTrue, "MemberNotLearner"
	}
	now := metav1.Now()
	cond := corev1.NodeCondition{Type: k3snode.EtcdIsVoterCondition, Status: st, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == k3snode.EtcdIsVoterCondition })
	n.Status.Conditions = append(n.Status.Conditions, cond)
	if _, err := f.c.Admin.CoreV1().Nodes().UpdateStatus(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// report writes what host's actuator did with command seq, with a token
// bound to an actuator Pod there.
func (f *fleet) report(host string, r acting.Report) {
	f.t.Helper()
	cl := f.c.ClientForToken(f.t, f.c.PodToken(f.t, actuatorSA, host))
	n, err := f.c.Admin.CoreV1().Nodes().Get(f.ctx, host, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	name, _ := acting.ActuatorRecordName(host)
	doc, _ := json.Marshal(r)
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": f.c.Namespace,
			"labels":          map[string]string{"fleet-role.io/record": acting.ActuatorRecordLabel, "app.kubernetes.io/part-of": "fleet-role"},
			"ownerReferences": []map[string]any{{"apiVersion": "v1", "kind": "Node", "name": host, "uid": string(n.UID)}}},
		"data": map[string]string{acting.ReportKey: string(doc)}})
	force := true
	if _, err := cl.ConfigMapClient(f.c.Namespace).Patch(f.ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "actuator", Force: &force}); err != nil {
		f.t.Fatalf("%s's report: %v", host, err)
	}
}

func (f *fleet) journal() *acting.Journal {
	f.t.Helper()
	j, _, err := f.c.Client(f.t, testkit.ControllerSA).SwapStore(f.c.Namespace).Journal(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// await polls the journal until cond holds, failing with the last status's
// acting part.
func (f *fleet) await(what string, within time.Duration, cond func(*acting.Journal) error) *acting.Journal {
	f.t.Helper()
	var j *acting.Journal
	deadline := time.Now().Add(within)
	for {
		j = f.journal()
		err := cond(j)
		if err == nil {
			return j
		}
		if time.Now().After(deadline) {
			st, _ := f.c.Status(f.t)
			var table strings.Builder
			if st != nil {
				_ = st.WriteTable(&table)
			}
			var nodes strings.Builder
			if l, err := f.c.Admin.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{}); err == nil {
				for _, n := range l.Items {
					var conds []string
					for _, c := range n.Status.Conditions {
						if c.Type == k3snode.EtcdIsVoterCondition || c.Type == corev1.NodeReady {
							conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
						}
					}
					fmt.Fprintf(&nodes, "%s labels %v annotations %v conditions %v\n", n.Name, n.Labels, n.Annotations, conds)
				}
			}
			f.t.Fatalf("%s: not after %v: %v\nstatus:\n%s\nnodes:\n%s", what, within, err, table.String(), nodes.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// periods waits until the controller has published a status n sample
// periods newer than the one published now: decisions made since.
func (f *fleet) periods(n int) {
	f.t.Helper()
	published, err := f.c.Status(f.t)
	if err != nil {
		f.t.Fatal(err)
	}
	testkit.Eventually(f.t, time.Minute, func() error {
		st, err := f.c.Status(f.t)
		if err != nil {
			return err
		}
		if st.GeneratedAt.Sub(published.GeneratedAt) < time.Duration(n)*f.s.SamplePeriod {
			return fmt.Errorf("the status generated at %s, %d periods after %s not yet", st.GeneratedAt, n, published.GeneratedAt)
		}
		return nil
	})
}

// step is the journal's record of n.
func step(j *acting.Journal, n acting.StepName) acting.JournalStep {
	for _, s := range j.Steps {
		if s.Name == n {
			return s
		}
	}
	return acting.JournalStep{}
}

// replica is one controller, elected, acting guided.
func (f *fleet) replica(id string, e controller.Election) *testkit.Loop {
	f.t.Helper()
	return f.metered(id, e, nil)
}

// metered is replica exporting its metrics to m.
func (f *fleet) metered(id string, e controller.Election, m *controller.Metrics) *testkit.Loop {
	f.t.Helper()
	cl := f.c.Client(f.t, testkit.ControllerSA)
	leases, err := cl.Leases(f.s.Namespace)
	if err != nil {
		f.t.Fatal(err)
	}
	ctrl, err := controller.New(controller.Config{Settings: f.s, Store: cl.ConfigMaps(f.s.Namespace),
		Records: testkit.RecordSource(f.t, cl, f.s.RecordsNamespace()), Nodes: cl.Nodes(), Swap: cl.SwapStore(f.s.Namespace), Metrics: m})
	if err != nil {
		f.t.Fatal(err)
	}
	e.Leases, e.Status, e.Identity, e.ReleaseOnCancel = leases, cl.StatusStore(f.s.Namespace), id, true
	return testkit.Go(f.t, "controller "+id, func(ctx context.Context) error { return ctrl.RunElected(ctx, e) })
}

// The controller carries a swap out on a real API server, acting guided:
// it publishes the plan, opens the swap only once approved, asks each
// actuator for each step in turn with its Lease term, passes the steps k3s
// does when the Nodes show them done, requests the leaving voter's
// removal through the admission policy that allows only that, and ends
// done. Its replacement, started over the journal mid-swap in a new term,
// picks the swap up without repeating a step or a command.
func TestActingControllerCarriesTheSwap(t *testing.T) {
	c := testkit.StartActing(t)
	f := newFleet(t, c, settings.ActingGuided)
	e := election(f.s)
	first := f.replica("a", e)

	plan := f.readyPlan()
	if j := f.journal(); j != nil {
		t.Fatalf("a journal before any approval: %+v", j)
	}
	// Published for two more periods, unapproved: still no journal.
	f.periods(2)
	if j := f.journal(); j != nil {
		t.Fatalf("a journal before any approval: %+v", j)
	}
	approve := func(id string) {
		text := id
		if err := c.PatchData(f.ctx, acting.ApprovalConfigMap, acting.ApprovalKey, &text); err != nil {
			t.Fatal(err)
		}
	}
	approve(plan.ID)

	// admit: S's actuator asked to turn etcd on and restart, in this term.
	j := f.await("the swap opened, admit asked of server-4", time.Minute, func(j *acting.Journal) error {
		if j == nil || j.Command == nil {
			return errors.New("no command yet")
		}
		return nil
	})
	term := j.Term
	if j.PlanID != plan.ID || j.Phase != acting.PhaseRunning || j.ApprovedBy != "operator" ||
		*j.Command != (acting.Command{PlanID: plan.ID, Seq: 1, Term: term, Host: "server-4", Verb: acting.VerbEtcdOn, Restart: true}) {
		t.Fatalf("the opened swap: plan %s phase %s approved by %s, command %+v", j.PlanID, j.Phase, j.ApprovedBy, *j.Command)
	}
	// k3s joins S as a learner once its actuator has done it: etcd's
	// voters know a fourth member, which no Node shows (k3s labels a
	// learner's Node only once it is promoted; test/acting saw it).
	f.report("server-4", acting.Report{PlanID: plan.ID, Seq: 1, Term: term, Done: true})
	f.members.Store(4)
	f.await("admit done, promote waiting on k3s", time.Minute, func(j *acting.Journal) error {
		if st := step(j, acting.StepAdmit).State; st != acting.StateDone {
			return fmt.Errorf("admit %s", st)
		}
		return nil
	})
	// Promoted: k3s labels and names S's Node, and its leader sets
	// EtcdIsVoter some seconds later (about 30 s on real k3s); a Node
	// labelled without the condition is no voter yet.
	f.patchNode("server-4", map[string]*string{k3snode.EtcdRoleLabel: ptr("true")},
		map[string]*string{k3snode.NodeNameAnnotation: ptr("server-4-1a2b3c4d"), k3snode.NodeAddressAnnotation: ptr("127.0.22.4")}, nil)

	// The controller is stopped here; another starts over the journal in a
	// new term and goes on from promote.
	f.periods(2)
	if st := step(f.journal(), acting.StepPromote).State; st == acting.StateDone {
		t.Fatal("promote done while S's Node is labelled etcd without k3s's EtcdIsVoter: a learner taken for a voter")
	}
	first.Stop(t)
	second := f.replica("b", e)
	f.patchNode("server-4", nil, nil, ptr(true))
	j = f.await("prewrite asked of server-3 by the new term", 2*time.Minute, func(j *acting.Journal) error {
		if j.Command == nil || j.Command.Verb != acting.VerbEtcdOff {
			return fmt.Errorf("step %+v, command %+v", j.Current(), j.Command)
		}
		return nil
	})
	if j.Term <= term || *j.Command != (acting.Command{PlanID: plan.ID, Seq: 2, Term: j.Term, Host: "server-3", Verb: acting.VerbEtcdOff}) {
		t.Fatalf("prewrite's command %+v in term %d after term %d", *j.Command, j.Term, term)
	}
	f.report("server-3", acting.Report{PlanID: plan.ID, Seq: 2, Term: j.Term, Done: true})

	// remove: server-3 does not lead, so move-leader is skipped. Its
	// settle goes out first; the removal is asked for only once
	// server-3's actuator holds it (past the removal, its host serves no
	// API).
	j = f.await("settle sent to server-3 with the removal", time.Minute, func(j *acting.Journal) error {
		if j.Command == nil || j.Command.Verb != acting.VerbSettle || j.Current() == nil || j.Current().Name != acting.StepRemove {
			return fmt.Errorf("step %+v, command %+v", j.Current(), j.Command)
		}
		return nil
	})
	if n, err := c.Admin.CoreV1().Nodes().Get(f.ctx, "server-3", metav1.GetOptions{}); err != nil || n.Annotations[acting.RemoveAnnotation] != "" {
		t.Fatalf("server-3's removal asked before its actuator armed the settle: %v, annotations %v", err, n.Annotations)
	}
	settle := *j.Command
	f.report("server-3", acting.Report{PlanID: plan.ID, Seq: settle.Seq, Term: j.Term, Armed: true})
	// Through the admission policy.
	f.await("server-3's removal requested", time.Minute, func(j *acting.Journal) error {
		n, err := c.Admin.CoreV1().Nodes().Get(f.ctx, "server-3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Annotations[acting.RemoveAnnotation] != "true" || n.Annotations[acting.RemoveRequestedAnnotation] != plan.ID {
			return fmt.Errorf("server-3's annotations: remove %q, requested %q; step %+v", n.Annotations[acting.RemoveAnnotation], n.Annotations[acting.RemoveRequestedAnnotation], j.Current())
		}
		if st := step(j, acting.StepMoveLeader).State; st != acting.StateSkipped {
			return fmt.Errorf("move-leader %s", st)
		}
		return nil
	})
	// k3s removes the member: its member controller deletes the remove
	// annotation, the member's name and address, and records
	// removed-node-name; the etcd label stays until k3s restarts there.
	f.members.Store(3)
	f.patchNode("server-3", nil, map[string]*string{acting.RemoveAnnotation: nil, k3snode.NodeNameAnnotation: nil,
		k3snode.NodeAddressAnnotation: nil, k3snode.RemovedNodeNameAnnotation: ptr("server-3-1a2b3c4d")}, nil)
	j = f.await("settle under way, the same command", time.Minute, func(j *acting.Journal) error {
		if j.Current() == nil || j.Current().Name != acting.StepSettle || j.Command == nil || j.Command.Seq != settle.Seq {
			return fmt.Errorf("step %+v, command %+v, want settle under way by command %d", j.Current(), j.Command, settle.Seq)
		}
		return nil
	})
	f.report("server-3", acting.Report{PlanID: plan.ID, Seq: settle.Seq, Term: j.Term, Done: true})
	// Restarted control-plane only, k3s takes its etcd label off.
	f.patchNode("server-3", map[string]*string{k3snode.EtcdRoleLabel: nil}, nil, nil)
	j = f.await("the swap done", time.Minute, func(j *acting.Journal) error {
		if j.Phase != acting.PhaseDone {
			return fmt.Errorf("phase %s, step %+v", j.Phase, j.Current())
		}
		return nil
	})
	second.Stop(t)

	// Every step once, in order; three commands, numbered 1 to 3.
	var ran []string
	for _, ev := range j.History {
		if ev.State == string(acting.StateRunning) && slices.Contains(acting.Steps, acting.StepName(ev.Step)) {
			ran = append(ran, ev.Step)
		}
	}
	if want := []string{"admit", "promote", "stabilise", "prewrite", "remove", "settle"}; !slices.Equal(ran, want) {
		t.Errorf("steps under way, in order: %v, want %v\n%+v", ran, want, j.History)
	}
	if j.Seq != 3 {
		t.Errorf("%d commands, want 3", j.Seq)
	}
	for _, s := range j.Steps {
		if s.State != acting.StateDone && s.State != acting.StateSkipped {
			t.Errorf("step %s %s", s.Name, s.State)
		}
	}
	t.Logf("swap %s done; history:", j.PlanID)
	for _, ev := range j.History {
		t.Logf("  %s %s %s term %d %s", ev.At.Format("15:04:05.000"), ev.Step, ev.State, ev.Term, ev.Cause)
	}
}

// newFleet starts the four hosts' probes on c, server-3 slow, with
// settings acting in mode, changed by each of tweak.
func newFleet(t *testing.T, c *testkit.Cluster, mode string, tweak ...func(*settings.Settings)) *fleet {
	t.Helper()
	s := testkit.Settings(t, 200*time.Millisecond)
	s.Acting, s.DryRun = mode, !(mode == settings.ActingGuided || mode == settings.ActingAuto)
	for _, tw := range tweak {
		tw(&s)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, c: c, s: s, ctx: context.Background()}
	f.add(f.node("server-1", true, false, true, "127.0.22.1"))
	f.add(f.node("server-2", true, true, true, "127.0.22.2"))
	f.add(f.node("server-3", true, true, true, "127.0.22.3"))
	f.add(f.node("server-4", false, true, true, "127.0.22.4"))
	f.slow.Store("server-3", true)
	f.members.Store(3)
	for _, n := range []string{"server-1", "server-2", "server-3", "server-4"} {
		cl := c.ProbeClient(t, n)
		p, err := probe.New(probe.Config{Node: n, Settings: s, Records: cl.Records(s.RecordsNamespace()), Nodes: cl.Nodes(),
			Sampler: &testkit.Sampler{Make: f.sample(n)}})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Go(t, "probe "+n, p.Run)
	}
	return f
}

// election is the replicas' Lease, its durations compressed as the
// settings' period is.
func election(s settings.Settings) controller.Election {
	return controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
}

// readyPlan waits for the plan of server-3's swap for server-4, ready but
// for the approval.
func (f *fleet) readyPlan() *acting.Plan {
	f.t.Helper()
	var plan *acting.Plan
	testkit.Eventually(f.t, 2*time.Minute, func() error {
		st, err := f.c.Status(f.t)
		if err != nil {
			return err
		}
		if st.Acting == nil || st.Acting.Plan == nil {
			return fmt.Errorf("no plan yet: decision %s %s -> %s", st.Decision.Action, st.Decision.Out, st.Decision.In)
		}
		if p := st.Acting.Plan; !p.Ready || p.Out.Node != "server-3" || p.In.Node != "server-4" {
			var held []string
			for _, g := range p.Steps[0].Guards {
				if !g.OK {
					held = append(held, string(g.Code)+": "+g.Detail)
				}
			}
			return fmt.Errorf("plan %s: %s out, %s in, ready %v; held by %s", p.ID, p.Out.Node, p.In.Node, p.Ready, strings.Join(held, "; "))
		}
		plan = st.Acting.Plan
		return nil
	})
	return plan
}

// acting plan, on the acting install: the controller publishes the step
// table of the swap it names and writes nothing else: the journal and
// every Node as they were, no actuator record, for as long as it decides.
func TestActingPlanWritesOnlyTheStatus(t *testing.T) {
	c := testkit.StartActing(t)
	f := newFleet(t, c, settings.ActingPlan)
	cms := c.Admin.CoreV1().ConfigMaps(c.Namespace)
	journalBefore, err := cms.Get(f.ctx, acting.JournalConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodesBefore := map[string]string{}
	l, err := c.Admin.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Items {
		nodesBefore[n.Name] = n.ResourceVersion
	}
	// The approval written too: plan never carries a swap out.
	loop := f.replica("a", election(f.s))
	plan := f.readyPlan()
	text := plan.ID
	if err := c.PatchData(f.ctx, acting.ApprovalConfigMap, acting.ApprovalKey, &text); err != nil {
		t.Fatal(err)
	}
	f.periods(3)
	loop.Stop(t)
	st, err := c.Status(t)
	if err != nil {
		t.Fatal(err)
	}
	if st.Acting == nil || st.Acting.Mode != settings.ActingPlan || st.Acting.Journal != nil || st.Acting.Stall != nil {
		t.Errorf("acting in the status: %+v, want plan, no journal, no stall", st.Acting)
	}
	if j, err := cms.Get(f.ctx, acting.JournalConfigMap, metav1.GetOptions{}); err != nil || j.ResourceVersion != journalBefore.ResourceVersion {
		t.Errorf("the journal changed under acting plan: %v, resourceVersion %s, was %s", err, j.ResourceVersion, journalBefore.ResourceVersion)
	}
	// The Nodes: the test's own status updates aside, none; a Node the
	// controller changed would carry k3s's remove annotation.
	l, err = c.Admin.CoreV1().Nodes().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Items {
		if n.ResourceVersion != nodesBefore[n.Name] || n.Annotations[acting.RemoveAnnotation] != "" {
			t.Errorf("node %s changed under acting plan (resourceVersion %s, was %s; annotations %v)", n.Name, n.ResourceVersion, nodesBefore[n.Name], n.Annotations)
		}
	}
	if r, _, err := c.Client(t, testkit.ControllerSA).SwapStore(c.Namespace).Reports(f.ctx); err != nil || len(r) != 0 {
		t.Errorf("actuator records under acting plan: %v, %v", r, err)
	}
}

// The published plan is judged with the journal's past, as the executor
// judges it: a swap that ended ten minutes ago holds the plan unready by
// the hour's cooldown, with its figures, and an approval of it begins
// nothing.
func TestActingPlanShowsTheCooldown(t *testing.T) {
	c := testkit.StartActing(t)
	f := newFleet(t, c, settings.ActingGuided)
	ended := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	started := ended.Add(-3 * time.Minute)
	old := &acting.Journal{Schema: acting.JournalSchema, Kind: acting.KindSwap, PlanID: "swap-0123456789",
		Out: acting.Party{Node: "server-2"}, In: acting.Party{Node: "server-4"}, Phase: acting.PhaseDone,
		ApprovedBy: "operator", Started: started, Ended: &ended, Term: 1,
		Past: []acting.Past{{PlanID: "swap-0123456789", Started: started, Ended: ended, Phase: acting.PhaseDone}}}
	for _, n := range acting.Steps {
		old.Steps = append(old.Steps, acting.JournalStep{Name: n, State: acting.StateDone})
	}
	data, err := kube.JournalData(old)
	if err != nil {
		t.Fatal(err)
	}
	// As an administrator restores a journal: deleted and created (the
	// admission policy refuses anyone but the controller an update).
	cms := c.Admin.CoreV1().ConfigMaps(c.Namespace)
	cm, err := cms.Get(f.ctx, acting.JournalConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(f.ctx, acting.JournalConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := cms.Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, Labels: cm.Labels}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loop := f.replica("a", election(f.s))

	var plan *acting.Plan
	var cooldown acting.Guard
	testkit.Eventually(t, 2*time.Minute, func() error {
		st, err := c.Status(t)
		if err != nil {
			return err
		}
		if st.Acting == nil || st.Acting.Plan == nil {
			return fmt.Errorf("no plan yet: decision %s %s -> %s", st.Decision.Action, st.Decision.Out, st.Decision.In)
		}
		p := st.Acting.Plan
		if p.Out.Node != "server-3" || p.In.Node != "server-4" {
			return fmt.Errorf("plan %s: %s out, %s in", p.ID, p.Out.Node, p.In.Node)
		}
		for _, g := range p.Steps[0].Guards {
			if g.Code == acting.GuardCooldown {
				plan, cooldown = p, g
				return nil
			}
		}
		return fmt.Errorf("plan %s has no %s guard on %s", p.ID, acting.GuardCooldown, p.Steps[0].Name)
	})
	since := time.Since(ended).Seconds()
	if cooldown.OK || plan.Ready || cooldown.Value == nil || cooldown.Limit == nil ||
		*cooldown.Value < 600 || *cooldown.Value > since || *cooldown.Limit != acting.SwapCooldown.Seconds() || cooldown.Unit != "seconds" {
		t.Fatalf("plan %s ready %v; its cooldown guard %+v, want held: a value of 600 to %.0f seconds since the swap ended, limit %.0f", plan.ID, plan.Ready, cooldown, since, acting.SwapCooldown.Seconds())
	}
	t.Logf("plan %s held: %s %.0f %s, limit %.0f (%s)", plan.ID, cooldown.Code, *cooldown.Value, cooldown.Unit, *cooldown.Limit, cooldown.Detail)

	text := plan.ID
	if err := c.PatchData(f.ctx, acting.ApprovalConfigMap, acting.ApprovalKey, &text); err != nil {
		t.Fatal(err)
	}
	f.periods(3)
	loop.Stop(t)
	if j, err := cms.Get(f.ctx, acting.JournalConfigMap, metav1.GetOptions{}); err != nil || j.ResourceVersion != created.ResourceVersion {
		t.Errorf("the journal was written during the cooldown: %v, resourceVersion %s, was %s", err, j.ResourceVersion, created.ResourceVersion)
	}
}
