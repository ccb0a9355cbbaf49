package acting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// JournalSchema names the journal's version (its "schema" field).
const JournalSchema = "fleet-role.io/swap/v1"

// JournalKey is the journal's key in its ConfigMap.
const JournalKey = "swap.json"

// MaxJournalBytes bounds what is read of a journal: its history is bounded
// by the steps (each at most held, running, then done or failed), so a
// larger one was not written by fleet-role.
const MaxJournalBytes = 64 << 10

// Phase is where a swap stands as a whole.
type Phase string

// Phases.
const (
	PhaseRunning  Phase = "running"  // a step is under way
	PhaseAborting Phase = "aborting" // undoing what was done, before the leaving voter went
	PhaseAborted  Phase = "aborted"  // undone; the fleet is as it was
	PhaseHalted   Phase = "halted"   // a step from remove on failed: nothing more is changed, the operator decides
	PhaseDone     Phase = "done"
)

// Open reports whether the swap still holds the cluster: no other swap
// may start.
func (p Phase) Open() bool { return p == PhaseRunning || p == PhaseAborting || p == PhaseHalted }

// Verb is what a command asks a host's actuator to do.
type Verb string

// The actuator's verbs.
const (
	// VerbEtcdOn writes DropInVoter; with Restart, restarts k3s.
	VerbEtcdOn Verb = "etcd-on"
	// VerbEtcdOff writes DropInStandby; with Restart, restarts k3s.
	VerbEtcdOff Verb = "etcd-off"
	// VerbSettle restarts k3s, its drop-in as it is, once the host's own
	// etcd member is out of etcd. The actuator takes it up (reports it
	// armed) before the controller asks k3s for the removal, and then
	// waits on its local member alone: once the member is removed, the
	// host's API server stops serving (it has no etcd), and with it, for
	// that host's actuator, every read of the journal.
	VerbSettle Verb = "settle"
	// VerbMoveLeader moves etcd's leadership from the host's own member,
	// if it leads, to Target.
	VerbMoveLeader Verb = "move-leader"
	// VerbRemoveMember removes Target from etcd: only the open plan's
	// newcomer, only when aborting.
	VerbRemoveMember Verb = "remove-member"
)

// Command is the one thing the journal asks of one host's actuator. The
// actuator carries out a (PlanID, Seq) at most once, and refuses one whose
// Term is older than the Lease's: a deposed controller's command.
type Command struct {
	PlanID  string `json:"plan_id"`
	Seq     int    `json:"seq"`
	Term    int32  `json:"term"`
	Host    string `json:"host"`
	Verb    Verb   `json:"verb"`
	Target  string `json:"target,omitempty"`
	Restart bool   `json:"restart,omitempty"`
}

// Report is what a host's actuator last did, as its record says.
type Report struct {
	PlanID string `json:"plan_id"`
	Seq    int    `json:"seq"`
	// Term is the command's term as the actuator read it.
	Term int32 `json:"term"`
	Done bool  `json:"done"`
	// Refused names why the actuator did not carry the command out (a
	// stale term, another host's, a member it may not remove); Error why
	// it failed.
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
	// Armed: the command is taken up and waits for its condition (a
	// settle, for the host's member to be removed); Done follows once it
	// is carried out.
	Armed bool `json:"armed,omitempty"`
}

// JournalStep is one step as the journal holds it.
type JournalStep struct {
	Name  StepName `json:"name"`
	State State    `json:"state"`
	// Started and Deadline are set once the step is reached; Done once it
	// is done, skipped or failed.
	Started  *time.Time `json:"started,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	// Seq is the command that carries the step out, 0 for none (a step
	// k3s or the controller does).
	Seq int `json:"seq,omitempty"`
	// Held names the guard that holds the step back.
	Held GuardCode `json:"held,omitempty"`
}

// Undo is one step of an abort.
type Undo string

// Undo steps. An abort takes restore-out first; then, for a newcomer still
// a learner, remove-in and standby-in; for one promoted to voter,
// standby-in and remove-in (a voter's host serves its API from its own
// member, so removed from under it, its actuator would read no
// standby-in; its own restart removes it instead).
const (
	// UndoRestoreOut writes DropInVoter back on X, without a restart: the
	// pre-write is taken back before anything else, so that X, if it
	// restarts, stays a voter.
	UndoRestoreOut Undo = "restore-out"
	// UndoRemoveIn removes S's member, learner or voter, from a voter host
	// (S itself may be cut off); found done when S's restart removed it.
	UndoRemoveIn Undo = "remove-in"
	// UndoStandbyIn writes DropInStandby on S and restarts it, so that S
	// never joins again by itself (and, a member still, leaves etcd as
	// k3s's RemoveSelf has it).
	UndoStandbyIn Undo = "standby-in"
)

// Abort is an abort under way or done.
type Abort struct {
	// Step is the step that failed and Cause why: a guard's code, or
	// "deadline", "refused" or "failed".
	Step  StepName  `json:"step"`
	Cause string    `json:"cause"`
	At    time.Time `json:"at"`
	// Undo is what is left to undo, in order; the first is under way.
	Undo []Undo `json:"undo"`
	Seq  int    `json:"seq,omitempty"`
}

// Abort and halt causes besides a guard's code.
const (
	CauseDeadline = "deadline" // the step did not end in its time
	CauseRefused  = "refused"  // k3s or the actuator refused the change
	CauseFailed   = "failed"   // the actuator reported an error
)

// Event is one line of a journal's history.
type Event struct {
	At    time.Time `json:"at"`
	Step  string    `json:"step"`
	State string    `json:"state"`
	Term  int32     `json:"term"`
	Cause string    `json:"cause,omitempty"`
}

// Past is one swap that ended, kept for the cooldown and the daily cap.
type Past struct {
	PlanID  string    `json:"plan_id"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Phase   Phase     `json:"phase"`
}

// Journal is the swap under way as the controller persists it: the
// ConfigMap fleet-role-swap, written with its resourceVersion as a
// precondition so that two writers never both succeed.
type Journal struct {
	Schema string `json:"schema"`
	// Kind is the plan's: swap (empty in a journal written before kinds),
	// or move-leader.
	Kind   PlanKind `json:"kind,omitempty"`
	PlanID string   `json:"plan_id"`
	Out    Party    `json:"out"`
	In     Party    `json:"in"`
	// LeaderTo is the member move-leader hands leadership to.
	LeaderTo string        `json:"leader_to,omitempty"`
	Phase    Phase         `json:"phase"`
	Steps    []JournalStep `json:"steps"`
	// Tolerance0 is the failure tolerance, unfit voters counted as lost,
	// when the swap began: no step may leave less.
	Tolerance0 int `json:"tolerance_at_start"`
	// ApprovedBy says what approved the swap: "operator" (guided) or
	// "auto".
	ApprovedBy string     `json:"approved_by"`
	Started    time.Time  `json:"started"`
	Ended      *time.Time `json:"ended,omitempty"`
	// Term is the Lease term of the controller that wrote the journal
	// last; every command carries the term that issued it.
	Term int32 `json:"term"`
	// StableSince is since when the newcomer was seen a fit voter without
	// a break (the stabilise step).
	StableSince *time.Time `json:"stable_since,omitempty"`
	// Seq numbers the commands; Command is the one under way.
	Seq     int      `json:"seq"`
	Command *Command `json:"command,omitempty"`
	Abort   *Abort   `json:"abort,omitempty"`
	// Halt is the cause a swap halted on.
	Halt    string  `json:"halt,omitempty"`
	History []Event `json:"history"`
	Past    []Past  `json:"past,omitempty"`
}

// step is the journal's record of n.
func (j *Journal) step(n StepName) *JournalStep {
	for i := range j.Steps {
		if j.Steps[i].Name == n {
			return &j.Steps[i]
		}
	}
	return nil
}

// Moves is what the journal's plan moves, as Parties says it.
func (j *Journal) Moves() string {
	return Parties(j.Kind, j.Out.Node, j.In.Node)
}

// Current is the step under way: the first that is neither done nor
// skipped; nil once the swap is no longer running.
func (j *Journal) Current() *JournalStep {
	if j.Phase != PhaseRunning {
		return nil
	}
	for i := range j.Steps {
		if s := &j.Steps[i]; s.State != StateDone && s.State != StateSkipped {
			return s
		}
	}
	return nil
}

// Clone is a deep copy: the executor never changes the journal it is given.
func (j *Journal) Clone() *Journal {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(j)
	if err != nil {
		panic(fmt.Sprintf("acting: clone journal: %v", err))
	}
	var c Journal
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("acting: clone journal: %v", err))
	}
	return &c
}

// Marshal is the journal's document.
func (j *Journal) Marshal() ([]byte, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("marshal journal: %w", err)
	}
	return b, nil
}

// ErrJournalTooLarge: a journal larger than MaxJournalBytes is refused
// unread.
var ErrJournalTooLarge = errors.New("journal too large")

// UnmarshalJournal reads a journal, refusing one too large, of another
// schema, with unknown fields, or naming a step or phase not in the
// vocabulary.
func UnmarshalJournal(data []byte) (*Journal, error) {
	if len(data) > MaxJournalBytes {
		return nil, fmt.Errorf("read journal: %d bytes, more than %d: %w", len(data), MaxJournalBytes, ErrJournalTooLarge)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j Journal
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("read journal: data after the document")
	}
	if j.Schema != JournalSchema {
		return nil, fmt.Errorf("read journal: schema %q, want %q", j.Schema, JournalSchema)
	}
	switch j.Phase {
	case PhaseRunning, PhaseAborting, PhaseAborted, PhaseHalted, PhaseDone:
	default:
		return nil, fmt.Errorf("read journal: phase %q is not one of running, aborting, aborted, halted, done", j.Phase)
	}
	if len(j.Steps) != len(Steps) {
		return nil, fmt.Errorf("read journal: %d steps, want %d", len(j.Steps), len(Steps))
	}
	for i, s := range j.Steps {
		if s.Name != Steps[i] {
			return nil, fmt.Errorf("read journal: step %d is %q, want %q", i, s.Name, Steps[i])
		}
	}
	return &j, nil
}
