package actuator

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

const (
	self      = "x"
	newcomer  = "https://10.0.0.9:2380"
	idX, idA  = uint64(0x8e9e05c52164694d), uint64(0x91bc3c398fb3c146)
	idB, idS  = uint64(0xfd422379fda50e48), uint64(0x2a5b6c7d8e9f0011)
	planID    = "swap-x-s-1"
	leaseTerm = int32(5)
)

// journal is a journal of plan planID (x out, s in) in phase p whose
// command is c.
func journal(p acting.Phase, c *acting.Command) *acting.Journal {
	j := &acting.Journal{Schema: acting.JournalSchema, PlanID: planID, Phase: p, Term: leaseTerm, Started: t0,
		Out: acting.Party{Node: "x", MemberID: FormatMemberID(idX), PeerURL: "https://10.0.0.1:2380"},
		In:  acting.Party{Node: "s", PeerURL: newcomer}, History: []acting.Event{}}
	for _, n := range acting.Steps {
		j.Steps = append(j.Steps, acting.JournalStep{Name: n, State: acting.StatePending})
	}
	if c != nil {
		j.Seq, j.Command = c.Seq, c
	}
	return j
}

func cmd(v acting.Verb, target string, restart bool) *acting.Command {
	return &acting.Command{PlanID: planID, Seq: 3, Term: leaseTerm, Host: self, Verb: v, Target: target, Restart: restart}
}

func term(t int32) *int32 { return &t }

// view is the local member x's view: it leads when leads, a, b voters, s
// a learner.
func view(leads bool) *EtcdView {
	v := &EtcdView{Self: idX, Leader: idA, Members: []Member{
		{ID: idX, Name: "x", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: idA, Name: "a", PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: idB, Name: "b", PeerURLs: []string{"https://10.0.0.3:2380"}},
		{ID: idS, Name: "s", PeerURLs: []string{newcomer}, Learner: true},
	}}
	if leads {
		v.Leader = idX
	}
	return v
}

func in(j *acting.Journal) Input {
	return Input{Node: self, Journal: j, Term: term(leaseTerm), State: State{Schema: StateSchema, Node: self}, Now: t0}
}

func TestIdleWithoutCommand(t *testing.T) {
	for _, j := range []*acting.Journal{nil, journal(acting.PhaseRunning, nil)} {
		if d := Decide(in(j)); d.Kind != KindIdle || d.Code != "" {
			t.Errorf("journal %v: %+v, want idle", j != nil, d)
		}
	}
}

func TestOtherHostIsLeftAlone(t *testing.T) {
	c := cmd(acting.VerbEtcdOn, "", true)
	c.Host = "s"
	d := Decide(in(journal(acting.PhaseRunning, c)))
	if d.Kind != KindIdle || d.Code != CodeOtherHost {
		t.Fatalf("%+v, want idle other_host", d)
	}
	if d.Report != (acting.Report{}) || d.Entry.PlanID != "" {
		t.Errorf("another host's command wrote a report or an entry: %+v", d)
	}
}

// The term is fenced at, just under and just over the Lease's
// leaseTransitions.
func TestTermFence(t *testing.T) {
	for _, c := range []struct {
		term int32
		want Kind
	}{
		{leaseTerm - 1, KindRefuse}, // a deposed controller's
		{leaseTerm, KindAct},        // the Lease's own term
		{leaseTerm + 1, KindAct},    // the Lease read before a new leader's write: a newer controller's
	} {
		cm := cmd(acting.VerbEtcdOn, "", false)
		cm.Term = c.term
		d := Decide(in(journal(acting.PhaseRunning, cm)))
		if d.Kind != c.want {
			t.Errorf("command term %d, Lease %d: %s, want %s (%+v)", c.term, leaseTerm, d.Kind, c.want, d)
			continue
		}
		if d.Kind == KindRefuse {
			if d.Code != CodeStaleTerm || d.Report.Done || !strings.HasPrefix(d.Report.Refused, "stale_term: ") || d.Report.Term != c.term || d.Report.Seq != 3 || d.Report.PlanID != planID {
				t.Errorf("term %d: report %+v code %s", c.term, d.Report, d.Code)
			}
			if d.Entry.Ended == nil || d.Entry.Outcome != OutcomeRefused {
				t.Errorf("term %d: entry %+v, want ended refused", c.term, d.Entry)
			}
		}
	}
}

func TestLeaseNeededAndAbsent(t *testing.T) {
	i := in(journal(acting.PhaseRunning, cmd(acting.VerbEtcdOn, "", true)))
	i.Term = nil
	if d := Decide(i); d.Kind != KindNeedLease {
		t.Errorf("no term: %+v, want need_lease", d)
	}
	i.LeaseAbsent = true
	if d := Decide(i); d.Kind != KindIdle || d.Code != CodeNoLease {
		t.Errorf("no Lease: %+v, want idle no_lease", d)
	}
}

func TestClosedPhaseRefused(t *testing.T) {
	for _, p := range []acting.Phase{acting.PhaseDone, acting.PhaseAborted, acting.PhaseHalted} {
		d := Decide(in(journal(p, cmd(acting.VerbEtcdOn, "", true))))
		if d.Kind != KindRefuse || d.Code != CodePhaseClosed || !strings.Contains(d.Report.Refused, string(p)) {
			t.Errorf("phase %s: %+v, want refused phase_closed", p, d)
		}
	}
	for _, p := range []acting.Phase{acting.PhaseRunning, acting.PhaseAborting} {
		if d := Decide(in(journal(p, cmd(acting.VerbEtcdOff, "", false)))); d.Kind != KindAct {
			t.Errorf("phase %s: %+v, want act", p, d)
		}
	}
}

func TestPlanMismatchAndUnknownVerb(t *testing.T) {
	c := cmd(acting.VerbEtcdOn, "", true)
	c.PlanID = "another"
	if d := Decide(in(journal(acting.PhaseRunning, c))); d.Kind != KindRefuse || d.Code != CodePlanMismatch {
		t.Errorf("another plan: %+v", d)
	}
	if d := Decide(in(journal(acting.PhaseRunning, cmd("reboot", "", false)))); d.Kind != KindRefuse || d.Code != CodeUnknownVerb {
		t.Errorf("unknown verb: %+v", d)
	}
}

// Each verb's action.
func TestVerbActions(t *testing.T) {
	for _, c := range []struct {
		c    *acting.Command
		want Action
	}{
		{cmd(acting.VerbEtcdOn, "", true), Action{Kind: ActWriteDropIn, DropIn: acting.DropInVoter, Restart: true}},
		{cmd(acting.VerbEtcdOn, "", false), Action{Kind: ActWriteDropIn, DropIn: acting.DropInVoter}},
		{cmd(acting.VerbEtcdOff, "", true), Action{Kind: ActWriteDropIn, DropIn: acting.DropInStandby, Restart: true}},
		{cmd(acting.VerbEtcdOff, "", false), Action{Kind: ActWriteDropIn, DropIn: acting.DropInStandby}},
	} {
		d := Decide(in(journal(acting.PhaseRunning, c.c)))
		if d.Kind != KindAct || d.Action != c.want {
			t.Errorf("%s restart %v: %+v, want %+v", c.c.Verb, c.c.Restart, d.Action, c.want)
		}
		if d.Entry.Ended != nil || d.Entry.PlanID != planID || d.Entry.Seq != 3 || !d.Entry.Started.Equal(t0) {
			t.Errorf("%s: entry %+v, want started at %v, not ended", c.c.Verb, d.Entry, t0)
		}
	}
}

// A settle arms at once (no etcd read: the term and plan are judged while
// the API serves), then restarts k3s only once nothing listens on the
// local member's port. While it waits it asks nothing of the API (no Lease
// read).
func TestSettleArmsThenWaitsForTheRemoval(t *testing.T) {
	c := cmd(acting.VerbSettle, "", true)
	j := journal(acting.PhaseRunning, c)
	d := Decide(in(j))
	if d.Kind != KindArm || !d.Entry.Armed || d.Entry.Ended != nil || !d.Report.Armed || d.Report.Done {
		t.Fatalf("settle taken up: %+v, want armed, reported armed", d)
	}
	armed := Input{Node: self, Journal: j, State: State{Schema: StateSchema, Node: self}.With(d.Entry), Now: t0.Add(time.Second)}
	// No Term: the Lease is not read again once armed.
	if d := Decide(armed); d.Kind != KindNeedEtcdPort {
		t.Fatalf("armed, nothing read yet: %+v, want the etcd port asked after", d)
	}
	up, down := true, false
	armed.EtcdListening = &up
	d2 := Decide(armed)
	if d2.Kind != KindPublish || !d2.Report.Armed {
		t.Fatalf("armed, the member listening, the report not yet written: %+v, want the armed report published", d2)
	}
	armed.Published = &d2.Report
	if d := Decide(armed); d.Kind != KindIdle || d.Code != CodeAwaitingRemoval {
		t.Fatalf("armed, the member listening: %+v, want idle, %s", d, CodeAwaitingRemoval)
	}
	armed.EtcdListening = &down
	if d := Decide(armed); d.Kind != KindAct || d.Action != (Action{Kind: ActRestart, Restart: true}) || d.Entry.Armed || d.Entry.Ended != nil {
		t.Errorf("armed, nothing listening: %+v, want k3s restarted, the entry started", d)
	}
}

func TestMoveLeader(t *testing.T) {
	run := func(target string, v *EtcdView) Decision {
		i := in(journal(acting.PhaseRunning, cmd(acting.VerbMoveLeader, target, false)))
		i.Etcd = v
		return Decide(i)
	}
	if d := run("zz", nil); d.Kind != KindRefuse || d.Code != CodeBadTarget {
		t.Errorf("bad target: %+v", d)
	}
	if d := run(FormatMemberID(idA), nil); d.Kind != KindNeedEtcd {
		t.Errorf("no view: %+v, want need_etcd", d)
	}
	if d := run(FormatMemberID(idA), view(true)); d.Kind != KindAct || d.Action.Kind != ActMoveLeader || d.Action.To != idA {
		t.Errorf("leads, target a voter: %+v", d)
	}
	// Not leading: done with nothing to move, whatever the target.
	for _, target := range []uint64{idA, idS, 0x1234} {
		if d := run(FormatMemberID(target), view(false)); d.Kind != KindAct || d.Action.Kind != ActNothing || !strings.Contains(d.Action.Note, "does not lead") {
			t.Errorf("not leading, target %x: %+v", target, d)
		}
	}
	for _, target := range []uint64{idS, 0x1234} { // a learner, no member
		if d := run(FormatMemberID(target), view(true)); d.Kind != KindRefuse || d.Code != CodeTargetNotVoter {
			t.Errorf("leads, target %x: %+v, want refused target_not_voter", target, d)
		}
	}
	if d := run(FormatMemberID(idX), view(true)); d.Kind != KindAct || d.Action.Kind != ActNothing {
		t.Errorf("target itself: %+v", d)
	}
}

func TestRemoveMember(t *testing.T) {
	run := func(p acting.Phase, target string, v *EtcdView) Decision {
		i := in(journal(p, cmd(acting.VerbRemoveMember, target, false)))
		i.Etcd = v
		return Decide(i)
	}
	// Any member but the newcomer is refused, in any phase, before etcd
	// is asked.
	for _, target := range []string{"https://10.0.0.2:2380", "https://10.0.0.1:2380", "", newcomer + "/"} {
		for _, p := range []acting.Phase{acting.PhaseRunning, acting.PhaseAborting} {
			if d := run(p, target, view(false)); d.Kind != KindRefuse || d.Code != CodeNotNewcomer {
				t.Errorf("%s, target %q: %+v, want refused not_newcomer", p, target, d)
			}
		}
	}
	if d := run(acting.PhaseRunning, newcomer, view(false)); d.Kind != KindRefuse || d.Code != CodeNotAborting {
		t.Errorf("running: %+v, want refused not_aborting", d)
	}
	if d := run(acting.PhaseAborting, newcomer, nil); d.Kind != KindNeedEtcd {
		t.Errorf("no view: %+v", d)
	}
	if d := run(acting.PhaseAborting, newcomer, view(false)); d.Kind != KindAct || d.Action.Kind != ActRemoveMember || d.Action.Member != idS {
		t.Errorf("aborting, newcomer a member: %+v", d)
	}
	gone := view(false)
	gone.Members = gone.Members[:3]
	if d := run(acting.PhaseAborting, newcomer, gone); d.Kind != KindAct || d.Action.Kind != ActNothing {
		t.Errorf("aborting, newcomer gone: %+v", d)
	}
}

// At most once: a command the state holds is never taken up again.
func TestAtMostOnce(t *testing.T) {
	c := cmd(acting.VerbEtcdOn, "", true)
	j := journal(acting.PhaseRunning, c)
	started := in(j)
	first := Decide(started)
	if first.Kind != KindAct {
		t.Fatalf("first: %+v", first)
	}

	// Started, never ended (the actuator stopped mid-command): failed as
	// interrupted, not carried out again.
	i := in(j)
	i.State = i.State.With(first.Entry)
	i.Now = t0.Add(time.Minute)
	d := Decide(i)
	if d.Kind != KindInterrupted || d.Code != CodeInterrupted || d.Report.Done || !strings.HasPrefix(d.Report.Error, "interrupted: ") || d.Entry.Outcome != OutcomeFailed {
		t.Fatalf("started: %+v", d)
	}

	// Done: reported done, and nothing more once the record holds it.
	done := first.Entry
	at := t0.Add(time.Minute)
	done.Ended, done.Outcome = &at, OutcomeDone
	i.State = in(j).State.With(done)
	d = Decide(i)
	if d.Kind != KindPublish || d.Report != (acting.Report{PlanID: planID, Seq: 3, Term: leaseTerm, Done: true}) {
		t.Fatalf("done, not published: %+v", d)
	}
	i.Published = &d.Report
	if d := Decide(i); d.Kind != KindIdle {
		t.Fatalf("done and published: %+v", d)
	}
	// The same command re-stamped by a newer controller is still done.
	c2 := *c
	c2.Term = leaseTerm + 1
	i.Journal = journal(acting.PhaseRunning, &c2)
	i.Term = term(leaseTerm + 1)
	if d := Decide(i); d.Kind != KindIdle {
		t.Fatalf("done, re-stamped: %+v", d)
	}

	// The local state lost, the record holds the report: not redone.
	i = in(j)
	i.Published = &acting.Report{PlanID: planID, Seq: 3, Term: leaseTerm, Done: true}
	if d := Decide(i); d.Kind != KindIdle || d.Code != CodeReported {
		t.Fatalf("state lost, reported: %+v", d)
	}
}

// A refusal is a judgement at a term: the newer term's copy is judged
// again, the same term's is not.
func TestRefusalJudgedAgainAtANewerTerm(t *testing.T) {
	c := cmd(acting.VerbEtcdOff, "", false)
	c.Term = leaseTerm - 1
	i := in(journal(acting.PhaseRunning, c))
	r := Decide(i)
	if r.Kind != KindRefuse || r.Code != CodeStaleTerm {
		t.Fatalf("%+v", r)
	}
	i.State = i.State.With(r.Entry)
	i.Published = &r.Report
	if d := Decide(i); d.Kind != KindIdle {
		t.Fatalf("same term again: %+v", d)
	}
	c2 := *c
	c2.Term = leaseTerm
	i.Journal = journal(acting.PhaseRunning, &c2)
	if d := Decide(i); d.Kind != KindAct || d.Action.DropIn != acting.DropInStandby {
		t.Fatalf("re-stamped at the Lease's term: %+v", d)
	}
	// The record alone (state lost) holds the old refusal: judged again.
	i.State = State{Schema: StateSchema, Node: self}
	if d := Decide(i); d.Kind != KindAct {
		t.Fatalf("state lost, old refusal: %+v", d)
	}
}

// A report the record does not hold yet goes out, with or without a
// command, and whoever's command it is.
func TestPendingReportPublished(t *testing.T) {
	at := t0
	e := Entry{PlanID: planID, Seq: 2, Term: leaseTerm, Verb: acting.VerbEtcdOn, Started: t0, Ended: &at, Outcome: OutcomeDone}
	other := cmd(acting.VerbEtcdOn, "", true)
	other.Host, other.Seq = "s", 4
	for _, j := range []*acting.Journal{nil, journal(acting.PhaseRunning, nil), journal(acting.PhaseRunning, other)} {
		i := in(j)
		i.State = i.State.With(e)
		d := Decide(i)
		if d.Kind != KindPublish || d.Report != e.Report() {
			t.Errorf("%+v, want publish %+v", d, e.Report())
		}
		r := e.Report()
		i.Published = &r
		if d := Decide(i); d.Kind != KindIdle {
			t.Errorf("published: %+v", d)
		}
	}
}

func TestStateBoundedAndRead(t *testing.T) {
	s := State{Schema: StateSchema, Node: self}
	for n := range MaxEntries + 5 {
		s = s.With(Entry{PlanID: planID, Seq: n + 1, Started: t0})
	}
	if len(s.Entries) != MaxEntries || s.Entries[0].Seq != 6 || s.Last().Seq != MaxEntries+5 {
		t.Fatalf("%d entries, first %d, last %d", len(s.Entries), s.Entries[0].Seq, s.Last().Seq)
	}
	// Recording an entry again moves it to the end, once.
	s = s.With(Entry{PlanID: planID, Seq: 10, Started: t0, Outcome: OutcomeDone})
	if len(s.Entries) != MaxEntries || s.Last().Seq != 10 || s.Find(planID, 10).Outcome != OutcomeDone {
		t.Fatalf("re-recorded: %d entries, last %+v", len(s.Entries), s.Last())
	}
	b, err := MarshalState(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(b, self)
	if err != nil || len(back.Entries) != MaxEntries {
		t.Fatalf("read back: %v, %d entries", err, len(back.Entries))
	}
	for _, c := range []struct{ name, text, node string }{
		{"another node", string(b), "y"},
		{"another schema", strings.Replace(string(b), StateSchema, "v0", 1), self},
		{"unknown field", strings.Replace(string(b), `"node"`, `"nodes": 1, "node"`, 1), self},
		{"trailing data", string(b) + "{}", self},
		{"too large", string(b) + strings.Repeat(" ", maxStateBytes), self},
	} {
		if _, err := UnmarshalState([]byte(c.text), c.node); err == nil {
			t.Errorf("%s: read", c.name)
		}
	}
}

func TestMemberIDs(t *testing.T) {
	for _, s := range []string{"", "0", "zz", "-1", "0x12", "1ffffffffffffffff"} {
		if _, err := ParseMemberID(s); err == nil {
			t.Errorf("%q read as a member ID", s)
		}
	}
	if id, err := ParseMemberID(FormatMemberID(idX)); err != nil || id != idX {
		t.Errorf("round trip: %x %v", id, err)
	}
}
