package acting

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// StepName is one step of a swap, from a fixed vocabulary that every tool
// reading the status may rely on.
type StepName string

// The steps of a swap of a leaving voter X for a standby S, in order
// (docs/acting.md, "The steps").
const (
	// StepAdmit: S's actuator drops disable-etcd and restarts k3s, which
	// joins S to etcd as a learner.
	StepAdmit StepName = "admit"
	// StepPromote: k3s's etcd leader promotes the caught-up learner.
	StepPromote StepName = "promote"
	// StepStabilise: S holds its vote, fit, for a while before X goes.
	StepStabilise StepName = "stabilise"
	// StepPrewrite: X's actuator writes disable-etcd without restarting,
	// so that an unplanned restart removes X rather than re-adds it.
	StepPrewrite StepName = "prewrite"
	// StepMoveLeader: X's actuator hands etcd's leadership to the fittest
	// voter that stays, when X leads.
	StepMoveLeader StepName = "move-leader"
	// StepRemove: the controller sets k3s's remove annotation on X's Node.
	StepRemove StepName = "remove"
	// StepSettle: X's actuator restarts k3s, control-plane only.
	StepSettle StepName = "settle"
	// StepDone: the swap is over.
	StepDone StepName = "done"
)

// Steps lists every step in the order a swap takes them.
var Steps = []StepName{StepAdmit, StepPromote, StepStabilise, StepPrewrite, StepMoveLeader, StepRemove, StepSettle, StepDone}

// State is where a step stands.
type State string

// States of a step.
const (
	StatePending State = "pending" // not reached yet
	StateHeld    State = "held"    // reached, a guard does not hold
	StateRunning State = "running" // its change is made or asked for, not yet seen done
	StateDone    State = "done"
	StateSkipped State = "skipped" // nothing to do (move-leader when X does not lead)
	StateFailed  State = "failed"  // past its deadline, or refused
)

// Actor is who carries a step out.
type Actor string

// Actors.
const (
	ActorActuator   Actor = "actuator"   // fleet-role's actuator on the step's host
	ActorK3s        Actor = "k3s"        // k3s itself (its etcd leader promotes)
	ActorController Actor = "controller" // fleet-role's controller
)

// Party is one host of the swap: the voter that leaves or the standby that
// comes in.
type Party struct {
	Node string `json:"node"`
	// MemberID is the etcd member ID, hex, as the host's record reports it;
	// empty for a standby that is no member yet.
	MemberID string `json:"member_id,omitempty"`
	// PeerURL is the etcd peer URL the member list holds for it (or will).
	PeerURL string `json:"peer_url,omitempty"`
}

// Standby kinds: what the standby that comes in is to k3s.
type StandbyKind string

// Standby kinds.
const (
	// StandbyServer: a k3s server with disable-etcd, which a restart
	// without it joins to etcd (the only kind fleet-role can promote).
	StandbyServer StandbyKind = "server"
	// StandbyAgent: a k3s agent, which only a reinstall as a server can
	// make a voter.
	StandbyAgent StandbyKind = "agent"
)

// Write is one change a step makes, as it would be written.
type Write struct {
	Kind WriteKind `json:"kind"`
	// Host is the host the change is made on or to.
	Host string `json:"host"`
	// Path is the file or the key written: the drop-in's path, the
	// annotation's key; empty for an etcd call.
	Path string `json:"path,omitempty"`
	// Content is what is written: the drop-in's text, the annotation's
	// value, the member ID the call names.
	Content string `json:"content,omitempty"`
	// Restart: k3s is restarted after the write.
	Restart bool `json:"restart,omitempty"`
}

// WriteKind is what a Write changes.
type WriteKind string

// Kinds of change.
const (
	WriteDropIn       WriteKind = "k3s_drop_in"   // a file in /etc/rancher/k3s/config.yaml.d
	WriteAnnotation   WriteKind = "annotation"    // an annotation on a Node
	WriteMoveLeader   WriteKind = "move_leader"   // etcd MoveLeader, on the leader's own member
	WriteRemoveMember WriteKind = "remove_member" // etcd MemberRemove (only the open plan's newcomer, when aborting)
	WriteRestart      WriteKind = "restart"       // k3s restarted, its drop-ins as they are
)

// Step is one row of the step table.
type Step struct {
	Name  StepName `json:"name"`
	State State    `json:"state"`
	Actor Actor    `json:"actor"`
	// Host is the host the step acts on.
	Host string `json:"host"`
	// Guards must all hold before the step's change is made.
	Guards []Guard `json:"guards"`
	Writes []Write `json:"writes,omitempty"`
	// Deadline is how long the step may take, with its basis; past it the
	// swap aborts (before remove) or halts (from remove on).
	Deadline Deadline `json:"deadline"`
}

// Deadline is a step's time limit and where it comes from.
type Deadline struct {
	Seconds float64 `json:"seconds"`
	Basis   string  `json:"basis"`
}

// PlanKind is what a plan changes.
type PlanKind string

// Plan kinds.
const (
	// KindSwap swaps an unfit voter out for a standby, add first.
	KindSwap PlanKind = "swap"
	// KindMoveLeader moves etcd's leadership off an unfit leader that no
	// standby can replace: no membership changes, and the worst fault
	// there is ends (every write waits for a slow leader). Its steps are
	// move-leader and done; the rest are skipped.
	KindMoveLeader PlanKind = "move-leader"
)

// Parties says who a plan of kind k moves: "X out, S in" for a swap,
// "etcd's leadership off X" for a leadership move.
func Parties(k PlanKind, out, in string) string {
	if k == KindMoveLeader {
		return "etcd's leadership off " + out
	}
	return out + " out, " + in + " in"
}

// Plan is the step table of the published swap or leadership move.
type Plan struct {
	// Kind is what the plan changes: swap, or move-leader.
	Kind PlanKind `json:"kind"`
	// ID names the swap for an approval: the same leaving member and
	// standby give the same ID at every decision.
	ID      string      `json:"id"`
	Out     Party       `json:"out"`
	In      Party       `json:"in"`
	Standby StandbyKind `json:"standby"`
	// Ready: every guard of the first step but the approval holds now,
	// so an approval would start it.
	Ready bool `json:"ready"`
	// Remedy says what the operator must do first when the plan cannot
	// be carried out as it stands (an agent standby); empty otherwise.
	Remedy string `json:"remedy,omitempty"`
	Steps  []Step `json:"steps"`
}

// PlanID is the ID of the swap of the member outMember of node out for the
// standby in: a digest, so that it is as long for every fleet and names
// nothing an approval could be mistaken for. A rebuilt out host is a new
// member, and so a new plan to approve.
func PlanID(out, outMember, in string) string {
	sum := sha256.Sum256([]byte(out + "\x00" + outMember + "\x00" + in))
	return "swap-" + hex.EncodeToString(sum[:5])
}

// LeadPlanID is the ID of the leadership move off member outMember of
// node out: a digest, as PlanID's, and never a swap's.
func LeadPlanID(out, outMember string) string {
	sum := sha256.Sum256([]byte("move-leader\x00" + out + "\x00" + outMember))
	return "lead-" + hex.EncodeToString(sum[:5])
}

// DropInPath is the k3s configuration drop-in the actuator owns on a host.
// k3s merges the files of config.yaml.d in lexical order after config.yaml,
// a later file's key replacing an earlier one's, so a name late in the
// order holds the last word on disable-etcd.
const DropInPath = "/etc/rancher/k3s/config.yaml.d/90-fleet-role.yaml"

// The two drop-ins the actuator writes (render k3s-config prints them too).
const (
	// DropInVoter lets k3s run etcd: it joins as a learner on start.
	DropInVoter = "# written by fleet-role: this server holds an etcd vote\ndisable-etcd: false\n"
	// DropInStandby makes the server control-plane only: on its next start
	// k3s removes its own member and keeps its API server.
	DropInStandby = "# written by fleet-role: this server is a standby, control plane only\ndisable-etcd: true\n"
)

// RemoveAnnotation is k3s's request to remove a Node's etcd member, which
// its member controller carries out and then deletes.
const RemoveAnnotation = "etcd.k3s.cattle.io/remove"

// RemoveRequestedAnnotation is set with RemoveAnnotation, in the same
// patch, to the plan ID. k3s's member controller deletes its own
// annotations when it removes the member (and the remove annotation alone
// when etcd refuses), never this one: with it, a removal k3s refused is
// told from one the controller never asked for before it was stopped.
const RemoveRequestedAnnotation = "fleet-role.io/remove-requested"

// Figures every deadline and guard derives from (docs/acting.md, "Limits").
const (
	// k3sManageTick is how often k3s's etcd leader looks for a learner to
	// promote (pkg/etcd/etcd.go manageTickerTime, 15 s).
	k3sManageTick = 15 * time.Second
	// k3sRemovalTimeout is how long k3s gives etcd's MemberRemove
	// (pkg/etcd/etcd.go removalTimeout, 1 min).
	k3sRemovalTimeout = time.Minute
	// SwapCooldown is the least time between the end of one swap and the
	// start of the next: Cluster API's control plane waits as long
	// (MinHealthyPeriod, 1 h) before it remediates again.
	SwapCooldown = time.Hour
	// swapsWindow is the span swaps are counted over for the daily cap.
	swapsWindow = 24 * time.Hour
	// APIRequestTimeout is how long fleet-role's clients wait for one API
	// request (internal/kube's request timeout; a test holds them equal).
	APIRequestTimeout = 10 * time.Second
)

// stableFor is how long S must hold its vote, fit, before X goes: two of
// its samples taken as a voter, the first whose etcd counters gained a whole
// period as a voter and one after it.
func stableFor(s settings.Settings) time.Duration { return 2 * s.SamplePeriod }

// deadline is each step's time limit.
func deadline(s settings.Settings, n StepName) Deadline {
	secs := func(d time.Duration, basis string) Deadline { return Deadline{Seconds: d.Seconds(), Basis: basis} }
	switch n {
	case StepAdmit:
		return secs(s.LearnerStallTime, "learner_stall_time: k3s gives a learner as long to start before it drops it")
	case StepPromote:
		return secs(s.LearnerStallTime+2*k3sManageTick, "learner_stall_time to catch up, plus two of k3s's 15 s ticks (manageTickerTime): one to promote, one for its leader to write EtcdIsVoter on the Node its k3s has labelled by then")
	case StepStabilise:
		return secs(stableFor(s)+s.LearnerStallTime, "two sample periods as a fit voter, plus learner_stall_time for its record to show it")
	case StepSettle:
		return secs(s.LearnerStallTime, "learner_stall_time: a k3s restart takes about as long as a join")
	case StepPrewrite:
		return secs(2*s.SamplePeriod+2*APIRequestTimeout, "two sample periods for the actuator's report (one record write missed), and two API request timeouts for the leaving voter's actuator to read the command and report, over the host's own path, which is slow by this swap's very cause (on k3s, with 300 ms each way, the command reached it 9 s after the journal was written)")
	case StepMoveLeader:
		return secs(2*s.SamplePeriod+2*s.ElectionTimeout+2*APIRequestTimeout, "two sample periods for a record to show the new leader (one missed), two election timeouts (etcd's MoveLeader waits up to one for the new leader), and two API request timeouts for the leaving voter's actuator to read the command and report, over the host's own path, which is slow by this swap's very cause")
	case StepRemove:
		return secs(2*k3sRemovalTimeout, "twice k3s's 1 min removal timeout (removalTimeout): one retry of its member controller")
	}
	return Deadline{}
}

// TotalDeadline is the longest a whole swap may take: every step's deadline.
func TotalDeadline(s settings.Settings) time.Duration {
	var d time.Duration
	for _, n := range Steps {
		d += time.Duration(deadline(s, n).Seconds * float64(time.Second))
	}
	return d
}

// MaxSwapsPerDay is the cap on swaps in any 24 hours: as many as there are
// votes, so that a judgement that flaps cannot churn one vote all day.
func MaxSwapsPerDay(s settings.Settings) int { return s.TargetVoters }
