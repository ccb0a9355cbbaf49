package actuator

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// Code says, stably, why the actuator refuses a command, did not take it
// up, or failed it. A refusal's report reads "CODE: detail".
type Code string

// Codes.
const (
	// CodeOtherHost: the command is another host's. Every actuator reads
	// the one journal; only the command's host acts on it and reports. The
	// others leave their records alone: the controller reads only the
	// command's host's report, and each host's record still holds its own
	// last report, which the controller may yet read (an abort's
	// restore-out is judged on the leaving voter's).
	CodeOtherHost Code = "other_host"
	// CodeNoLease: the controller's Lease is absent, so no term can be
	// judged: the command waits (the controller that wrote it held the
	// Lease; the next one makes it anew).
	CodeNoLease Code = "no_lease"
	// CodeReported: the record already reports this command (the local
	// state was lost): not taken up again.
	CodeReported Code = "reported"
	// CodeAwaitingRemoval: a settle is armed and the local member is
	// still in etcd.
	CodeAwaitingRemoval Code = "awaiting_removal"

	// Refusals.
	CodeStaleTerm      Code = "stale_term"       // the command's term is below the Lease's leaseTransitions: a deposed controller's
	CodePlanMismatch   Code = "plan_mismatch"    // the command names another plan than its journal's
	CodePhaseClosed    Code = "phase_closed"     // the journal's phase is neither running nor aborting
	CodeUnknownVerb    Code = "unknown_verb"     // a verb this actuator does not know
	CodeNotNewcomer    Code = "not_newcomer"     // remove-member of a member that is not the plan's newcomer
	CodeNotAborting    Code = "not_aborting"     // remove-member while the swap is not aborting
	CodeBadTarget      Code = "bad_target"       // move-leader to no member ID (hex)
	CodeTargetNotVoter Code = "target_not_voter" // move-leader to a learner or no member

	// CodeInterrupted is a failure: the actuator stopped while carrying
	// the command out (its state says started, never ended); it is not
	// carried out again.
	CodeInterrupted Code = "interrupted"
)

// Kind is what a Decision asks of the adapters.
type Kind string

// Kinds.
const (
	// KindIdle: nothing to do (Code may say why).
	KindIdle Kind = "idle"
	// KindNeedLease and KindNeedEtcd: read the Lease's term, or the local
	// etcd member's view, into the Input and decide again.
	KindNeedLease Kind = "need_lease"
	KindNeedEtcd  Kind = "need_etcd"
	// KindNeedEtcdPort: find whether anything listens on the local
	// member's port (Input.EtcdListening), asking the member nothing.
	KindNeedEtcdPort Kind = "need_etcd_port"
	// KindPublish: write Report to the record; the state has it already.
	KindPublish Kind = "publish"
	// KindRefuse and KindInterrupted: record Entry (ended) in the state,
	// then publish Report.
	KindRefuse      Kind = "refuse"
	KindInterrupted Kind = "interrupted"
	// KindAct: record Entry (started) in the state, carry out Action,
	// record how it ended, publish its report.
	KindAct Kind = "act"
	// KindArm: record Entry (armed) in the state, then publish Report: a
	// settle taken up, waiting for the host's member to leave etcd.
	KindArm Kind = "arm"
)

// ActionKind names what an Action does.
type ActionKind string

// Action kinds.
const (
	// ActWriteDropIn writes DropIn to acting.DropInPath under the host's
	// root, then restarts k3s when Restart.
	ActWriteDropIn ActionKind = "write_drop_in"
	// ActRestart restarts k3s.
	ActRestart ActionKind = "restart"
	// ActMoveLeader hands etcd's leadership from the local member to To.
	ActMoveLeader ActionKind = "move_leader"
	// ActRemoveMember removes member Member (PeerURL) from etcd.
	ActRemoveMember ActionKind = "remove_member"
	// ActNothing: the command's goal holds already (Note says why): done.
	ActNothing ActionKind = "nothing"
)

// Action is the one change a command asks for, typed.
type Action struct {
	Kind    ActionKind
	DropIn  string
	Restart bool
	// To and Member are etcd member IDs; PeerURL the removed member's.
	To, Member uint64
	PeerURL    string
	Note       string
}

// EtcdView is what the local etcd member says, for move-leader and
// remove-member: its own ID, the leader it knows, and the members.
type EtcdView struct {
	Self, Leader uint64
	Members      []Member
}

// Member is one etcd member.
type Member struct {
	ID       uint64
	Name     string
	PeerURLs []string
	Learner  bool
}

// Input is everything a decision reads.
type Input struct {
	// Node is this host's node name.
	Node string
	// Journal is the journal as last read; nil for none.
	Journal *acting.Journal
	// Term is the Lease's leaseTransitions, nil until read (KindNeedLease);
	// LeaseAbsent says it was read and there is no Lease.
	Term        *int32
	LeaseAbsent bool
	// State is the local state; Published the report the record holds
	// (nil for none or not read).
	State     State
	Published *acting.Report
	// Etcd is the local member's view, nil until read (KindNeedEtcd);
	// EtcdListening whether anything listens on its port, nil until
	// found (KindNeedEtcdPort).
	Etcd          *EtcdView
	EtcdListening *bool
	Now           time.Time
}

// Decision is what the actuator does next.
type Decision struct {
	Kind    Kind
	Command acting.Command
	// Code and Detail say why (a refusal, an idle, an interruption).
	Code   Code
	Detail string
	Action Action
	// Entry is what to record in the state (KindAct: started; KindRefuse,
	// KindInterrupted: ended); Report what to publish.
	Entry  Entry
	Report acting.Report
}

// Decide is the actuator's one decision: pure, from in alone.
func Decide(in Input) Decision {
	j := in.Journal
	if j == nil || j.Command == nil {
		return pending(in, Decision{Kind: KindIdle})
	}
	c := *j.Command
	if c.Host != in.Node {
		return pending(in, Decision{Kind: KindIdle, Command: c, Code: CodeOtherHost,
			Detail: fmt.Sprintf("command %s/%d is for host %q, this is %q", c.PlanID, c.Seq, c.Host, in.Node)})
	}
	if e := in.State.Find(c.PlanID, c.Seq); e != nil {
		switch {
		case e.Armed && e.Ended == nil:
			return awaitRemoval(in, c, e)
		case e.Ended == nil:
			ended := *e
			t := in.Now
			ended.Ended, ended.Outcome = &t, OutcomeFailed
			ended.Error = string(CodeInterrupted) + ": the actuator stopped while carrying it out, begun " + e.Started.UTC().Format(time.RFC3339) + "; it is not carried out again"
			return Decision{Kind: KindInterrupted, Command: c, Code: CodeInterrupted, Detail: ended.Error, Entry: ended, Report: ended.Report()}
		case e.Outcome == OutcomeRefused && c.Term > e.Term:
			// A newer term's copy of a command refused under an older
			// one: judged again, as the controller expects (it ignores a
			// refusal of an older term than its journal's).
		default:
			return publish(in, e.Report(), Decision{Kind: KindIdle, Command: c})
		}
	} else if p := in.Published; p != nil && p.PlanID == c.PlanID && p.Seq == c.Seq && (p.Refused == "" || c.Term <= p.Term) {
		return Decision{Kind: KindIdle, Command: c, Code: CodeReported,
			Detail: fmt.Sprintf("the record reports command %s/%d already (done %v, refused %q, error %q), though the local state does not hold it", c.PlanID, c.Seq, p.Done, p.Refused, p.Error)}
	}
	if in.Term == nil {
		if in.LeaseAbsent {
			return Decision{Kind: KindIdle, Command: c, Code: CodeNoLease, Detail: "the controller's Lease does not exist: no term to judge the command's by"}
		}
		return Decision{Kind: KindNeedLease, Command: c}
	}
	// Only a term below the Lease's is a deposed controller's. One above
	// it is a newer controller's whose Lease write this read missed (the
	// journal is read from the watch, the Lease after it): accepted.
	if c.Term < *in.Term {
		return refuse(in, c, CodeStaleTerm, fmt.Sprintf("command term %d is below the Lease's leaseTransitions %d: a deposed controller's", c.Term, *in.Term))
	}
	if c.PlanID != j.PlanID {
		return refuse(in, c, CodePlanMismatch, fmt.Sprintf("command names plan %q, its journal plan %q", c.PlanID, j.PlanID))
	}
	if j.Phase != acting.PhaseRunning && j.Phase != acting.PhaseAborting {
		return refuse(in, c, CodePhaseClosed, fmt.Sprintf("the journal's phase is %s: commands are carried out only while it is %s or %s", j.Phase, acting.PhaseRunning, acting.PhaseAborting))
	}
	switch c.Verb {
	case acting.VerbEtcdOn:
		return act(in, c, Action{Kind: ActWriteDropIn, DropIn: acting.DropInVoter, Restart: c.Restart})
	case acting.VerbEtcdOff:
		return act(in, c, Action{Kind: ActWriteDropIn, DropIn: acting.DropInStandby, Restart: c.Restart})
	case acting.VerbSettle:
		// Armed at once: the term and the plan are judged now, while the
		// host's API server still serves; what follows needs only the
		// local member.
		e := entryOf(c, in.Now)
		e.Armed = true
		return Decision{Kind: KindArm, Command: c, Entry: e, Report: e.Report()}
	case acting.VerbMoveLeader:
		return moveLeader(in, c)
	case acting.VerbRemoveMember:
		return removeMember(in, j, c)
	}
	return refuse(in, c, CodeUnknownVerb, fmt.Sprintf("verb %q is none of %s, %s, %s, %s, %s", c.Verb,
		acting.VerbEtcdOn, acting.VerbEtcdOff, acting.VerbSettle, acting.VerbMoveLeader, acting.VerbRemoveMember))
}

// awaitRemoval carries an armed settle on: k3s is restarted once nothing
// listens on the local member's port any more (etcd closes a removed
// member's server within a second of its removal); until then the armed
// report is published and the actuator waits. Nothing here reads the API
// (the host's API server stops serving with its member), nor asks the
// member anything: etcd 3.6.5's maintenance Status on a member stopping
// after its removal dereferences its closed backend, and on k3s v1.34.2
// that crashed k3s (test/acting). An etcd that does not listen because k3s
// is down is restarted too: the standby drop-in is on the host (prewrite),
// so a k3s start removes the member itself (RemoveSelf) as the removal
// asked for would.
func awaitRemoval(in Input, c acting.Command, e *Entry) Decision {
	switch {
	case in.EtcdListening == nil:
		return Decision{Kind: KindNeedEtcdPort, Command: c}
	case !*in.EtcdListening:
		return act(in, c, Action{Kind: ActRestart, Restart: true})
	}
	return publish(in, e.Report(), Decision{Kind: KindIdle, Command: c, Code: CodeAwaitingRemoval,
		Detail: "the local etcd member still listens: k3s restarts once it is removed and closes"})
}

// moveLeader hands leadership to the target when the local member leads.
// A member that does not lead has nothing to hand over: the command is done
// with nothing to do, whatever its target, since what the step wants (the
// leaving voter not leading) holds; a refusal would abort a swap over a
// step already achieved. Leadership is judged first for that reason; a
// target that is no voter is refused only when there is something to move.
func moveLeader(in Input, c acting.Command) Decision {
	to, err := ParseMemberID(c.Target)
	if err != nil {
		return refuse(in, c, CodeBadTarget, err.Error())
	}
	if in.Etcd == nil {
		return Decision{Kind: KindNeedEtcd, Command: c}
	}
	v := in.Etcd
	if v.Leader != v.Self {
		return act(in, c, Action{Kind: ActNothing, To: to, Note: fmt.Sprintf("the local member %s does not lead (the leader is %s): nothing to move", FormatMemberID(v.Self), FormatMemberID(v.Leader))})
	}
	if to == v.Self {
		return act(in, c, Action{Kind: ActNothing, To: to, Note: "the target is the local member, which leads already"})
	}
	i := slices.IndexFunc(v.Members, func(m Member) bool { return m.ID == to })
	if i < 0 || v.Members[i].Learner {
		what := "no member"
		if i >= 0 {
			what = "a learner"
		}
		return refuse(in, c, CodeTargetNotVoter, fmt.Sprintf("target %s is %s, not a voter: leadership goes only to a voter", c.Target, what))
	}
	return act(in, c, Action{Kind: ActMoveLeader, To: to})
}

// removeMember removes the plan's newcomer, and only it, only while the
// swap aborts: the one removal docs/acting.md gives the actuator.
func removeMember(in Input, j *acting.Journal, c acting.Command) Decision {
	if c.Target == "" || c.Target != j.In.PeerURL {
		return refuse(in, c, CodeNotNewcomer, fmt.Sprintf("target %q is not the plan's newcomer %s (%q): the actuator removes no other member", c.Target, j.In.Node, j.In.PeerURL))
	}
	if j.Phase != acting.PhaseAborting {
		return refuse(in, c, CodeNotAborting, fmt.Sprintf("the journal's phase is %s: the newcomer is removed only while the swap is %s", j.Phase, acting.PhaseAborting))
	}
	if in.Etcd == nil {
		return Decision{Kind: KindNeedEtcd, Command: c}
	}
	for _, m := range in.Etcd.Members {
		if slices.Contains(m.PeerURLs, c.Target) {
			return act(in, c, Action{Kind: ActRemoveMember, Member: m.ID, PeerURL: c.Target})
		}
	}
	return act(in, c, Action{Kind: ActNothing, PeerURL: c.Target, Note: "no member has peer URL " + c.Target + ": it is gone already"})
}

func act(in Input, c acting.Command, a Action) Decision {
	return Decision{Kind: KindAct, Command: c, Action: a, Entry: entryOf(c, in.Now)}
}

func refuse(in Input, c acting.Command, code Code, detail string) Decision {
	e := entryOf(c, in.Now)
	t := in.Now
	e.Ended, e.Outcome, e.Refused = &t, OutcomeRefused, string(code)+": "+detail
	return Decision{Kind: KindRefuse, Command: c, Code: code, Detail: detail, Entry: e, Report: e.Report()}
}

// pending publishes the last command's report when the record does not hold
// it yet (a write that failed, or one an actuator stopped before), else
// returns d.
func pending(in Input, d Decision) Decision {
	if last := in.State.Last(); last != nil && last.Ended != nil {
		return publish(in, last.Report(), d)
	}
	return d
}

// publish asks to write r unless the record holds it already, else
// returns d.
func publish(in Input, r acting.Report, d Decision) Decision {
	if in.Published != nil && *in.Published == r {
		return d
	}
	d.Kind, d.Report = KindPublish, r
	return d
}

// ParseMemberID reads an etcd member ID as the journal and etcd's labels
// write it: hex, without 0x.
func ParseMemberID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || s == "" || id == 0 {
		return 0, fmt.Errorf("target %q is no etcd member ID (non-zero hex, as etcd writes them)", s)
	}
	return id, nil
}

// FormatMemberID writes an etcd member ID as etcd's labels do: unpadded
// lowercase hex.
func FormatMemberID(id uint64) string { return strconv.FormatUint(id, 16) }
