package acting

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// roundsLimit bounds a swap in rounds: the whole swap's deadline over the
// model's tick, with room for an abort's undo.
func roundsLimit(s settings.Settings) int { return 2 * int(TotalDeadline(s)/modelTick) }

// run drives the model until the journal ends, killing the controller in
// the round numbered killAt (counting only rounds that write) the way k
// says; after a kill the next controller may hold a newer term.
func run(t *testing.T, m *model, killAt int, k kill, newTerm bool) (writes int) {
	t.Helper()
	writes, ok := drive(m, killAt, k, newTerm, nil)
	if !ok {
		t.Fatalf("the swap did not end in %d rounds; journal %+v\nmodel log:\n%s", roundsLimit(m.s), m.journal, strings.Join(m.log, "\n"))
	}
	return writes
}

// drive is run's loop: a round of the controller (killed in the writing
// round killAt), then between (the test's own fault, if any), then, unless
// the journal has settled, a tick of the model. ok is false when the swap
// did not settle within roundsLimit.
func drive(m *model, killAt int, k kill, newTerm bool, between func()) (writes int, ok bool) {
	for i := 0; i < roundsLimit(m.s); i++ {
		kk := killNone
		if writes == killAt {
			kk = k
		}
		if m.round(settings.ActingGuided, kk) {
			writes++
			if kk != killNone && newTerm {
				m.lease++
			}
		}
		if between != nil {
			between()
		}
		if m.journal != nil && settled(m.journal.Phase) {
			return writes, true
		}
		m.step()
	}
	return writes, false
}

// settled: the executor takes no further step by itself.
func settled(p Phase) bool { return p != PhaseRunning && p != PhaseAborting }

// checkSwapped asserts the end every swap must reach: x out, s a voter, x a
// ready control-plane-only server, the journal done, nothing twice.
func checkSwapped(t *testing.T, m *model) {
	t.Helper()
	if m.journal.Phase != PhaseDone {
		t.Fatalf("phase %s, want done (abort %+v, halt %q)\nmodel log:\n%s", m.journal.Phase, m.journal.Abort, m.journal.Halt, strings.Join(m.log, "\n"))
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,s" {
		t.Errorf("voters %s, want a,b,s", got)
	}
	x := m.hosts["x"]
	if x.etcdLabel || x.etcdOn || !x.ready {
		t.Errorf("x: etcd label %v, etcd on %v, ready %v: want a ready control-plane-only server", x.etcdLabel, x.etcdOn, x.ready)
	}
	checkSafe(t, m)
}

// checkSafe asserts what holds through every run, aborted or not.
func checkSafe(t *testing.T, m *model) {
	t.Helper()
	if m.maxLearners > 1 {
		t.Errorf("%d learners at once, want at most 1", m.maxLearners)
	}
	if m.maxMembers > m.s.TargetVoters+1 {
		t.Errorf("%d members at once, want at most target_voters+1 = %d", m.maxMembers, m.s.TargetVoters+1)
	}
	if m.minAliveMargin < 0 {
		t.Errorf("connected voters fell %d below quorum", -m.minAliveMargin)
	}
	for key, n := range m.executed {
		if n > 1 {
			t.Errorf("command %s carried out %d times", key, n)
		}
	}
	if err := historyOK(m.journal); err != nil {
		t.Error(err)
	}
}

func TestSwapEndToEnd(t *testing.T) {
	for _, leader := range []string{"a", "x"} {
		t.Run("leader="+leader, func(t *testing.T) {
			m := newModel(leader)
			run(t, m, -1, killNone, false)
			checkSwapped(t, m)
			ml := m.journal.step(StepMoveLeader)
			if want := map[string]State{"a": StateSkipped, "x": StateDone}[leader]; ml.State != want {
				t.Errorf("move-leader %s, want %s", ml.State, want)
			}
			if leader == "x" && m.leader == "x" {
				t.Error("x still leads")
			}
		})
	}
}

// TestKilledAtEveryBoundary kills the controller at every round that writes,
// before the journal and between the journal and the Node, with the same
// term and with a new leader's: every run ends swapped, no command carried
// out twice, no step run again once done.
func TestKilledAtEveryBoundary(t *testing.T) {
	writes := run(t, newModel("x"), -1, killNone, false)
	boundaries := 0
	for at := 0; at < writes; at++ {
		for _, k := range []kill{killBeforeJournal, killBeforeNode} {
			for _, newTerm := range []bool{false, true} {
				t.Run(fmt.Sprintf("round%d/kill%d/newterm=%v", at, k, newTerm), func(t *testing.T) {
					m := newModel("x")
					run(t, m, at, k, newTerm)
					checkSwapped(t, m)
				})
				boundaries++
			}
		}
	}
	t.Logf("%d kills over %d writing rounds of a clean swap", boundaries, writes)
}

// TestStandbyCutOffAborts cuts the standby off once it is a learner: k3s
// cannot promote it, the promote step passes its deadline, the abort
// removes the learner from a voter host and, once the standby is back,
// makes it control-plane only; it never votes.
func TestStandbyCutOffAborts(t *testing.T) {
	for _, peer := range []bool{false, true} {
		t.Run(fmt.Sprintf("peer-traffic-only=%v", peer), func(t *testing.T) {
			writes := cutOff(t, -1, killNone, false, peer)
			// The same with the controller killed at every round that
			// writes, the abort's among them.
			for at := 0; at < writes; at++ {
				for _, k := range []kill{killBeforeJournal, killBeforeNode} {
					for _, newTerm := range []bool{false, true} {
						t.Run(fmt.Sprintf("round%d/kill%d/newterm=%v", at, k, newTerm), func(t *testing.T) { cutOff(t, at, k, newTerm, peer) })
					}
				}
			}
		})
	}
}

// cutOff is one run of TestStandbyCutOffAborts, killing the controller in
// the writing round killAt as run does. The standby is cut off whole once
// it is a learner, and mended once the abort has removed its member; or,
// with peer, only its etcd peer traffic is cut, from before the swap until
// the abort has ended, as test/acting cuts it: it joins as a learner that
// never catches up, and joins again after every removal until the abort
// makes it a standby.
func cutOff(t *testing.T, killAt int, k kill, newTerm, peer bool) (writes int) {
	t.Helper()
	m := newModel("a")
	m.hosts["s"].peerCut = peer
	healed := false
	writes, _ = drive(m, killAt, k, newTerm, func() {
		if peer {
			if m.journal != nil && m.journal.Phase == PhaseAborted && m.hosts["s"].peerCut {
				m.hosts["s"].peerCut = false
				m.logf("mend s's peer traffic")
			}
			return
		}
		if mm := m.members["s"]; mm != nil && mm.learner && !m.hosts["s"].cut && !healed {
			m.hosts["s"].cut = true
			m.logf("cut s")
		}
		if m.journal != nil && m.journal.Phase == PhaseAborting && m.members["s"] == nil && m.hosts["s"].cut {
			m.hosts["s"].cut, healed = false, true
			m.logf("mend s")
		}
	})
	if m.journal == nil {
		t.Fatalf("no journal\n%s", strings.Join(m.log, "\n"))
	}
	if m.journal.Phase != PhaseAborted {
		t.Fatalf("phase %s, want aborted\n%s", m.journal.Phase, strings.Join(m.log, "\n"))
	}
	if a := m.journal.Abort; a.Step != StepPromote || a.Cause != CauseDeadline {
		t.Errorf("abort at %s for %s, want promote for deadline", a.Step, a.Cause)
	}
	// Long after, with the standby back: never a voter, never a member.
	for range 3 * int(m.s.LearnerStallTime/modelTick) {
		m.step()
	}
	if m.everVoter["s"] || m.members["s"] != nil || m.hosts["s"].etcdOn {
		t.Errorf("s voted %v, member %v, etcd on %v after the abort", m.everVoter["s"], m.members["s"] != nil, m.hosts["s"].etcdOn)
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,x" {
		t.Errorf("voters %s, want a,b,x as before", got)
	}
	checkSafe(t, m)
	return writes
}

// TestUnplannedRestartAfterPrewrite restarts the leaving voter after the
// pre-write: k3s removes its member (RemoveSelf) instead of re-adding it,
// and the swap carries on to done.
func TestUnplannedRestartAfterPrewrite(t *testing.T) {
	m := newModel("a")
	restarted := false
	for i := 0; i < roundsLimit(m.s); i++ {
		m.round(settings.ActingGuided, killNone)
		if p := m.journal; p != nil && p.step(StepPrewrite).State == StateDone && !restarted {
			m.hosts["x"].restartAt, m.hosts["x"].ready, restarted = m.now.Add(modelTick), false, true
			m.logf("unplanned restart of x")
		}
		if m.journal != nil && !m.journal.Phase.Open() {
			break
		}
		m.step()
	}
	if !restarted {
		t.Fatal("the pre-write was never done")
	}
	checkSwapped(t, m)
	if n := strings.Count(strings.Join(m.log, "\n"), "member add x"); n != 1 {
		t.Errorf("x was added %d times, want once, when the fleet formed", n)
	}
}

// TestRefusedRemovalHalts: k3s's member controller drops the annotation
// without removing the member; the swap halts at four voters and changes
// nothing more.
func TestRefusedRemovalHalts(t *testing.T) {
	m := newModel("a")
	m.refuseRemove = true
	run(t, m, -1, killNone, false)
	if m.journal.Phase != PhaseHalted || m.journal.Halt != CauseRefused {
		t.Fatalf("phase %s halt %q, want halted for refused", m.journal.Phase, m.journal.Halt)
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,s,x" {
		t.Errorf("voters %s, want a,b,s,x", got)
	}
	before := len(m.executed)
	for range 20 {
		m.round(settings.ActingGuided, killNone)
		m.step()
	}
	if len(m.executed) != before || m.hosts["x"].removeAnn {
		t.Error("a halted swap changed the cluster")
	}
	checkSafe(t, m)
}

// TestStaleTermRefused: a command of an older term than the Lease's is
// refused by the actuator, and the executor fails the step on the refusal
// only if it issued it in its own term; a new leader re-stamps it.
func TestStaleTermRefused(t *testing.T) {
	m := newModel("a")
	m.round(settings.ActingGuided, killNone)
	if m.journal == nil || m.journal.Command == nil {
		t.Fatal("the swap did not open")
	}
	m.lease = 2 // a new leader took the Lease; the old one's command is late
	m.step()
	if r := m.hosts["s"].report; r == nil || r.Refused == "" {
		t.Fatalf("report %+v, want a refusal of the stale command", r)
	}
	if n := m.executed[fmt.Sprintf("%s/%d", m.journal.PlanID, m.journal.Command.Seq)]; n != 0 {
		t.Fatalf("the stale command was carried out %d times", n)
	}
}

func TestPlanModeWritesNothing(t *testing.T) {
	m := newModel("a")
	for range 10 {
		for _, mode := range []string{settings.ActingOff, settings.ActingPlan} {
			if out := Next(m.journal, m.world(), mode, 1); out.Journal != nil || out.Annotate != "" {
				t.Fatalf("acting %s wrote %+v", mode, out)
			}
		}
		m.step()
	}
}

func TestGuidedWaitsForTheApproval(t *testing.T) {
	m := newModel("a")
	w := m.world()
	w.Approved = ""
	if out := Next(nil, w, settings.ActingGuided, 1); out.Journal != nil {
		t.Fatal("opened without an approval")
	}
	w.Approved = "swap-0000000000"
	if out := Next(nil, w, settings.ActingGuided, 1); out.Journal != nil {
		t.Fatal("opened on another plan's approval")
	}
}

// TestAutoApprovesAfterAWindow: auto opens the swap once it was published
// without a break for window x sample_period, not before.
func TestAutoApprovesAfterAWindow(t *testing.T) {
	m := newModel("a")
	m.s.Acting = settings.ActingAuto
	need := time.Duration(m.s.Window) * m.s.SamplePeriod
	for _, c := range []struct {
		since time.Duration
		open  bool
	}{{need - time.Millisecond, false}, {need, true}, {need + time.Millisecond, true}} {
		w := m.world()
		w.Approved, w.SteadySince = "", w.Now.Add(-c.since)
		if out := Next(nil, w, settings.ActingAuto, 1); (out.Journal != nil) != c.open {
			t.Errorf("published steadily for %v: opened %v, want %v", c.since, out.Journal != nil, c.open)
		}
	}
}

// TestDeadlineBoundary: a step at exactly its deadline still runs; just
// over, it fails.
func TestDeadlineBoundary(t *testing.T) {
	m := newModel("a")
	m.hosts["s"].cut = true // its actuator never acts: admit never ends
	m.round(settings.ActingGuided, killNone)
	admit := m.journal.step(StepAdmit)
	for _, c := range []struct {
		at   time.Duration
		fail bool
	}{{-time.Millisecond, false}, {0, false}, {time.Millisecond, true}} {
		w := m.world()
		w.Now = admit.Deadline.Add(c.at)
		out := Next(m.journal, w, settings.ActingGuided, 1)
		failed := out.Journal != nil && out.Journal.step(StepAdmit).State == StateFailed
		if failed != c.fail {
			t.Errorf("at the deadline %+v: failed %v, want %v", c.at, failed, c.fail)
		}
	}
}

// TestLeaderThatWillNotMoveAborts: the leaving voter leads and etcd never
// hands its leadership on; move-leader passes its deadline and the swap,
// not yet past remove, rolls back: the pre-write taken back first, the
// newcomer's vote removed, the newcomer control-plane only again.
func TestLeaderThatWillNotMoveAborts(t *testing.T) {
	m := newModel("x")
	m.stuckLeader = true
	run(t, m, -1, killNone, false)
	if m.journal.Phase != PhaseAborted || m.journal.Abort.Step != StepMoveLeader || m.journal.Abort.Cause != CauseFailed {
		t.Fatalf("phase %s abort %+v, want aborted at move-leader, its actuator's MoveLeader failed\n%s", m.journal.Phase, m.journal.Abort, strings.Join(m.log, "\n"))
	}
	// Leadership first: the move failed before anything else changed, so
	// there is nothing to undo and the standby was never asked to join.
	if len(m.journal.Abort.Undo) != 0 || m.journal.step(StepAdmit).Seq != 0 {
		t.Errorf("undo %v, admit command %d: want nothing to undo, no admit", m.journal.Abort.Undo, m.journal.step(StepAdmit).Seq)
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,x" || !m.hosts["x"].etcdOn || m.hosts["s"].etcdOn {
		t.Errorf("voters %s, x etcd on %v, s etcd on %v: want a,b,x as before, x's drop-in a voter's, s's a standby's", got, m.hosts["x"].etcdOn, m.hosts["s"].etcdOn)
	}
	checkSafe(t, m)
}

// Leadership first: when the leaving voter leads, the swap moves its
// leadership before it admits the standby (every write, the standby's
// catch-up and its k3s's start would otherwise wait on the unfit leader),
// and then takes its steps in order, move-leader already done.
func TestLeadershipMovesFirst(t *testing.T) {
	m := newModel("x")
	run(t, m, -1, killNone, false)
	checkSwapped(t, m)
	var order []string
	for _, e := range m.journal.History {
		if e.State == string(StateDone) || e.State == string(StateSkipped) {
			order = append(order, e.Step)
		}
	}
	if want := "move-leader,admit,promote,stabilise,prewrite,remove,settle,done,swap"; strings.Join(order, ",") != want {
		t.Errorf("steps done in the order %s, want %s", strings.Join(order, ","), want)
	}
}

// TestSettleArmedBeforeTheRemoval: k3s is asked to remove the leaving
// voter only once its actuator holds the settle, since past the removal
// its host serves no API (the model's apiDown); the settle then needs
// nothing but the local member, and is the same command through remove
// and settle.
func TestSettleArmedBeforeTheRemoval(t *testing.T) {
	m := newModel("a")
	var armedAt, annotatedAt, removedAt int
	for i := 1; i < roundsLimit(m.s); i++ {
		m.round(settings.ActingGuided, killNone)
		x := m.hosts["x"]
		if armedAt == 0 && x.armed != nil {
			armedAt = i
		}
		if annotatedAt == 0 && x.removeReq != "" {
			annotatedAt = i
			if c := m.journal.Command; c == nil || c.Verb != VerbSettle || c.Host != "x" || c.Seq != m.journal.step(StepRemove).Seq {
				t.Fatalf("removal asked with command %+v, want x's settle, the remove step's", c)
			}
		}
		if removedAt == 0 && m.members["x"] == nil {
			removedAt = i
		}
		if !m.journal.Phase.Open() {
			break
		}
		m.step()
	}
	checkSwapped(t, m)
	if !(armedAt > 0 && armedAt <= annotatedAt && annotatedAt <= removedAt) {
		t.Errorf("x's settle armed in round %d, the removal asked in %d, x removed in %d: want armed, then asked, then removed\n%s",
			armedAt, annotatedAt, removedAt, strings.Join(m.log, "\n"))
	}
	if rm, st := m.journal.step(StepRemove), m.journal.step(StepSettle); rm.Seq == 0 || st.Seq != rm.Seq {
		t.Errorf("remove's command %d, settle's %d: want one settle command through both", rm.Seq, st.Seq)
	}
}

// TestRemoveFailsBeforeTheRequestAborts: the leaving voter's actuator
// never arms its settle (it is cut off once the standby drop-in is
// written): the removal is never asked for, and at remove's deadline the
// swap, having removed nothing, rolls back rather than halts (x mended,
// its drop-in a voter's again). Once the removal is asked for, the same
// deadline halts it.
func TestRemoveFailsBeforeTheRequestAborts(t *testing.T) {
	m := newModel("a")
	_, ok := drive(m, -1, killNone, false, func() {
		switch j := m.journal; {
		case j == nil:
		case j.step(StepRemove).State == StateRunning && m.hosts["x"].report.Seq != j.step(StepRemove).Seq:
			m.hosts["x"].cut = true
		case j.Phase == PhaseAborting:
			m.hosts["x"].cut = false
		}
	})
	j := m.journal
	if !ok || j.Phase != PhaseAborted || j.Abort == nil || j.Abort.Step != StepRemove || j.Abort.Cause != CauseDeadline {
		t.Fatalf("phase %s abort %+v: want aborted at remove's deadline\n%s", j.Phase, j.Abort, strings.Join(m.log, "\n"))
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,x" || !m.hosts["x"].etcdOn || m.hosts["x"].removeReq != "" {
		t.Errorf("voters %s, x etcd on %v, removal asked %q: want a,b,x, x's drop-in a voter's, no removal asked", got, m.hosts["x"].etcdOn, m.hosts["x"].removeReq)
	}
	checkSafe(t, m)

	// Asked: the Node carries the request and k3s never answers.
	m = newModel("a")
	for i := 0; i < roundsLimit(m.s) && m.hosts["x"].removeReq == ""; i++ {
		m.round(settings.ActingGuided, killNone)
		m.step()
	}
	rm := m.journal.step(StepRemove)
	if m.hosts["x"].removeReq == "" || rm.State != StateRunning {
		t.Fatalf("the removal was never asked for: remove %s", rm.State)
	}
	w := m.world()
	for i := range w.Hosts {
		if h := &w.Hosts[i]; h.Name == "x" {
			h.Voter, h.Removed, h.RemoveAnnotation = true, false, true
		}
	}
	w.Now = rm.Deadline.Add(time.Millisecond)
	out := Next(m.journal, w, settings.ActingGuided, 1)
	if out.Journal == nil || out.Journal.Phase != PhaseHalted || out.Journal.Halt != CauseDeadline {
		t.Errorf("the removal asked, its deadline passed: %+v, want halted at the deadline", out.Journal)
	}
}

// TestLeaderMovedOnItsOwn: the decision would replace x, which leads, but
// has no fit standby: the plan is a leadership move alone (item 7), whose
// one step hands etcd's leadership to a fit voter; no member is added or
// removed, and the move counts for the cooldown as a swap does.
func TestLeaderMovedOnItsOwn(t *testing.T) {
	m := newModel("x")
	m.noStandby = true
	p := Draft(m.world(), settings.ActingGuided)
	if p == nil || p.Kind != KindMoveLeader || p.ID != LeadPlanID("x", m.memberID("x")) || !p.Ready || len(p.Steps) != 2 || p.Steps[0].Name != StepMoveLeader {
		t.Fatalf("draft %+v, want a ready move-leader plan of two steps", p)
	}
	run(t, m, -1, killNone, false)
	j := m.journal
	if j.Phase != PhaseDone || j.Kind != KindMoveLeader || j.step(StepMoveLeader).State != StateDone {
		t.Fatalf("phase %s kind %s move-leader %s, want done\n%s", j.Phase, j.Kind, j.step(StepMoveLeader).State, strings.Join(m.log, "\n"))
	}
	if m.leader == "x" || m.leader == "" {
		t.Errorf("leader %q, want a voter other than x", m.leader)
	}
	for _, s := range j.Steps {
		if s.Name != StepMoveLeader && s.Name != StepDone && s.State != StateSkipped {
			t.Errorf("step %s %s, want skipped: a leadership move changes no membership", s.Name, s.State)
		}
	}
	if got := strings.Join(m.voters(), ","); got != "a,b,x" || m.members["s"] != nil || m.maxMembers != 3 {
		t.Errorf("voters %s, s a member %v, most members %d: want a,b,x and no other member ever", got, m.members["s"] != nil, m.maxMembers)
	}
	if w := WithPast(m.world(), j); w.LastSwapEnded.IsZero() || w.SwapsDay != 1 {
		t.Errorf("after the move: last ended %v, %d today; want it counted as a swap is", w.LastSwapEnded, w.SwapsDay)
	}
	checkSafe(t, m)

	// A move etcd never makes aborts at its deadline with nothing to undo.
	m = newModel("x")
	m.noStandby, m.stuckLeader = true, true
	run(t, m, -1, killNone, false)
	if j := m.journal; j.Phase != PhaseAborted || j.Abort == nil || j.Abort.Step != StepMoveLeader || len(j.Abort.Undo) != 0 {
		t.Errorf("stuck leader: phase %s abort %+v, want aborted at move-leader, nothing to undo", j.Phase, j.Abort)
	}

	// No leadership move when the voter to replace does not lead, or
	// when no voter can take the leadership.
	m = newModel("a")
	m.noStandby = true
	if p := Draft(m.world(), settings.ActingGuided); p != nil {
		t.Errorf("x does not lead: draft %+v, want none", p)
	}
	m = newModel("x")
	m.noStandby = true
	m.hosts["a"].verdict, m.hosts["b"].verdict = "unfit", "unknown"
	p = Draft(m.world(), settings.ActingGuided)
	if p == nil || p.Ready || p.Steps[0].State != StateHeld {
		t.Fatalf("no fit voter to lead: %+v, want a plan held", p)
	}
	if g := p.Steps[0].Guards[1]; g.Code != GuardLeaderTarget || g.OK {
		t.Errorf("guard %+v, want %s failing", g, GuardLeaderTarget)
	}
}

// TestLeaderMoveKilledAtEveryBoundary: the leadership move resumed after
// the controller is killed at each of its writing rounds, before the
// journal and after it, in the same term and a newer one: done, the
// leadership off x, no member changed.
func TestLeaderMoveKilledAtEveryBoundary(t *testing.T) {
	clean := newModel("x")
	clean.noStandby = true
	writes := run(t, clean, -1, killNone, false)
	for at := 0; at < writes; at++ {
		for _, k := range []kill{killBeforeJournal, killBeforeNode} {
			for _, newTerm := range []bool{false, true} {
				m := newModel("x")
				m.noStandby = true
				run(t, m, at, k, newTerm)
				if m.journal.Phase != PhaseDone || m.leader == "x" || strings.Join(m.voters(), ",") != "a,b,x" {
					t.Errorf("killed in round %d (%d, new term %v): phase %s, leader %s, voters %v", at, k, newTerm, m.journal.Phase, m.leader, m.voters())
				}
				if err := historyOK(m.journal); err != nil {
					t.Errorf("killed in round %d: %v", at, err)
				}
			}
		}
	}
}
