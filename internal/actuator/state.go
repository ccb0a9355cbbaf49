package actuator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// StateSchema names the local state file's version.
const StateSchema = "fleet-role.io/actuator-state/v1"

// MaxEntries bounds the commands the local state remembers. The journal
// holds one command at a time and its Seq only grows within a plan, so
// at-most-once needs only the command the journal holds now; the rest is
// history for the operator. A swap issues at most 4 commands running
// (admit, prewrite, move-leader, settle with the removal) and 3 aborting (restore-out,
// remove-in, standby-in), each perhaps re-issued once under a new Seq after
// a failure: 32 keeps two whole swaps' worth for any one host.
const MaxEntries = 32

// maxStateBytes bounds what is read of the state file: MaxEntries entries
// of a few hundred bytes each (a plan ID, a peer URL, a refusal's detail)
// fit in a small fraction of it; a larger file was not written here.
const maxStateBytes = 256 << 10

// Outcome is how a command the actuator took up ended.
type Outcome string

// Outcomes.
const (
	OutcomeDone    Outcome = "done"
	OutcomeRefused Outcome = "refused"
	OutcomeFailed  Outcome = "failed"
)

// Entry is one command as the local state records it: written when the
// actuator takes it up (Ended nil) and again when it ends.
type Entry struct {
	PlanID  string      `json:"plan_id"`
	Seq     int         `json:"seq"`
	Term    int32       `json:"term"`
	Verb    acting.Verb `json:"verb"`
	Target  string      `json:"target,omitempty"`
	Restart bool        `json:"restart,omitempty"`
	Started time.Time   `json:"started"`
	Ended   *time.Time  `json:"ended,omitempty"`
	Outcome Outcome     `json:"outcome,omitempty"`
	// Refused is the refusal's code and detail ("stale_term: ..."); Error
	// why it failed.
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
	// Note says why a command was done with nothing to do (a leader that
	// does not lead, a member already gone).
	Note string `json:"note,omitempty"`
	// Armed: a settle taken up, waiting for the host's member to leave
	// etcd; nothing is under way yet, so an actuator that stops here
	// waits on when it starts again (an entry started and not armed that
	// never ended was interrupted).
	Armed bool `json:"armed,omitempty"`
}

// Report is what the actuator's record says of e once it ended, or while
// it is armed.
func (e Entry) Report() acting.Report {
	return acting.Report{PlanID: e.PlanID, Seq: e.Seq, Term: e.Term, Done: e.Outcome == OutcomeDone, Refused: e.Refused, Error: e.Error, Armed: e.Armed && e.Ended == nil}
}

func entryOf(c acting.Command, now time.Time) Entry {
	return Entry{PlanID: c.PlanID, Seq: c.Seq, Term: c.Term, Verb: c.Verb, Target: c.Target, Restart: c.Restart, Started: now}
}

// State is the actuator's local state: the commands it took up, oldest
// first.
type State struct {
	Schema  string  `json:"schema"`
	Node    string  `json:"node"`
	Entries []Entry `json:"entries"`
}

// Find is the entry of (planID, seq), nil for none.
func (s State) Find(planID string, seq int) *Entry {
	for i := len(s.Entries) - 1; i >= 0; i-- {
		if e := &s.Entries[i]; e.PlanID == planID && e.Seq == seq {
			return e
		}
	}
	return nil
}

// Last is the entry taken up last, nil for none.
func (s State) Last() *Entry {
	if len(s.Entries) == 0 {
		return nil
	}
	return &s.Entries[len(s.Entries)-1]
}

// With is s with e recorded: in place of the entry of the same (PlanID,
// Seq), moved to the end, or appended, the oldest dropped past MaxEntries.
// s itself is not changed.
func (s State) With(e Entry) State {
	out := State{Schema: StateSchema, Node: s.Node, Entries: make([]Entry, 0, len(s.Entries)+1)}
	for _, o := range s.Entries {
		if o.PlanID != e.PlanID || o.Seq != e.Seq {
			out.Entries = append(out.Entries, o)
		}
	}
	out.Entries = append(out.Entries, e)
	if n := len(out.Entries) - MaxEntries; n > 0 {
		out.Entries = out.Entries[n:]
	}
	return out
}

// MarshalState is the state file's text.
func MarshalState(s State) ([]byte, error) {
	s.Schema = StateSchema
	if s.Entries == nil {
		s.Entries = []Entry{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal actuator state: %w", err)
	}
	return append(b, '\n'), nil
}

// UnmarshalState reads a state file written for node, refusing one too
// large, of another schema or node, or with unknown fields: a state the
// actuator cannot trust is no state it may act on.
func UnmarshalState(data []byte, node string) (State, error) {
	if len(data) > maxStateBytes {
		return State{}, fmt.Errorf("read actuator state: %d bytes, more than %d", len(data), maxStateBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s State
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("read actuator state: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return State{}, errors.New("read actuator state: data after the document")
	}
	if s.Schema != StateSchema {
		return State{}, fmt.Errorf("read actuator state: schema %q, want %q", s.Schema, StateSchema)
	}
	if s.Node != node {
		return State{}, fmt.Errorf("read actuator state: written for node %q, this is %q", s.Node, node)
	}
	return s, nil
}
