// Package nodeevents records the controller's decisions where operators
// look first, `kubectl describe node`: an Event on a host's Node when its
// verdict changes, and when the swap is advised or held back by another
// step than before. Which Events a decision calls for is a pure function of
// the previous decision and this one (Changes); Recorder writes them as
// client-go's recorder does, counting, folding and rate-limiting them
// (recorder.go).
package nodeevents

import (
	"fmt"
	"strings"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	corev1 "k8s.io/api/core/v1"
)

// Reasons of the Events: a short CamelCase word each, as Kubernetes names
// its own (NodeReady, Rebooted).
const (
	ReasonFit         = "Fit"
	ReasonUnfit       = "Unfit"
	ReasonUnknown     = "Unknown"
	ReasonSwapAdvised = "SwapAdvised"
	ReasonSwapHeld    = "SwapHeld"
)

// MaxMessageBytes is the most an Event's message holds: the API server
// refuses a note over 1 KiB on events.k8s.io/v1 (NoteLengthLimit), and a
// core/v1 Event is read back through that API too.
const MaxMessageBytes = 1024

// Event is one Event a decision calls for, on the Node named Node.
type Event struct {
	Node    string
	Type    string // corev1.EventTypeWarning for a host judged unfit, else Normal
	Reason  string
	Message string
}

// Changes returns the Events one decision calls for, at most one per host:
//
//   - a host whose verdict differs from the previous decision's (a host the
//     previous decision did not list counts as having been unknown, so that a
//     new host's first unknown verdict says nothing): reason Fit, Unfit or
//     Unknown, the message the deciding reason's number against its limit;
//   - the voter a swap would take out, when the swap is new (another out or
//     in, or none before): SwapAdvised;
//   - every unfit voter, when no swap is made and the step that holds it
//     back (the decision's deciding step) differs from the previous
//     decision's: SwapHeld, with that step's reason.
//
// The deciding reason and step are those the status names by index
// (status.DecidingReason, Decision.DecidingStep), never found by a
// reason's words.
//
// A host with several of these gets one Event: the swap's reason, its
// message followed by the verdict's.
func Changes(prev, cur *status.Status) []Event {
	was := map[string]status.Verdict{}
	if prev != nil {
		for _, h := range prev.Hosts {
			was[h.Name] = h.Verdict
		}
	}
	type pending struct {
		reason string
		parts  []string
	}
	byHost := map[string]*pending{}
	order := []string{}
	add := func(host, reason, part string, decision bool) {
		p := byHost[host]
		if p == nil {
			p = &pending{}
			byHost[host] = p
			order = append(order, host)
		}
		if decision || p.reason == "" {
			p.reason = reason
		}
		if decision {
			p.parts = append([]string{part}, p.parts...)
		} else {
			p.parts = append(p.parts, part)
		}
	}
	verdicts := map[string]status.Host{}
	for _, h := range cur.Hosts {
		verdicts[h.Name] = h
		before, ok := was[h.Name]
		if !ok {
			before = status.Unknown
		}
		if h.Verdict == before {
			continue
		}
		why := "no reason given"
		if r, ok := status.DecidingReason(h); ok {
			why = status.Summary(r)
		}
		add(h.Name, verdictReason(h.Verdict), fmt.Sprintf("fleet-role judges this %s %s (was %s): %s", h.Role, h.Verdict, before, why), false)
	}

	d := cur.Decision
	var pd status.Decision
	if prev != nil {
		pd = prev.Decision
	}
	switch {
	case d.Action == status.ActionSwap:
		if pd.Action != status.ActionSwap || pd.Out != d.Out || pd.In != d.In {
			msg := fmt.Sprintf("fleet-role would swap this voter out for %s (dry run: nothing is changed)", d.In)
			if a := cur.Acting; a != nil && (a.Mode == settings.ActingGuided || a.Mode == settings.ActingAuto) {
				msg = fmt.Sprintf("fleet-role publishes the swap of this voter out for %s (acting %s: carried out as its plan's guards allow)", d.In, a.Mode)
			}
			// The step that decides a swap names the voter out and why.
			if r, ok := d.DecidingStep(); ok {
				msg += ": " + r.Detail
			}
			add(d.Out, ReasonSwapAdvised, msg, true)
		}
	default:
		held, ok := d.DecidingStep()
		// A swap before holds nothing, so any step that holds now is new.
		if before, was := pd.DecidingStep(); !ok || was && pd.Action != status.ActionSwap && before.Code == held.Code {
			break
		}
		for _, h := range cur.Hosts {
			if h.Role == status.RoleVoter && h.Verdict == status.Unfit {
				add(h.Name, ReasonSwapHeld, fmt.Sprintf("fleet-role would swap no voter: step %s holds it back: %s", held.Signal, held.Detail), true)
			}
		}
	}

	out := make([]Event, 0, len(order))
	for _, host := range order {
		p := byHost[host]
		typ := corev1.EventTypeNormal
		if verdicts[host].Verdict == status.Unfit {
			typ = corev1.EventTypeWarning
		}
		// Escaped as the CLI escapes what it prints (status.Printable), then
		// clipped: a reason's detail may carry a record's text, and
		// `kubectl describe node` and `kubectl get events` print a message
		// as it is, so that a terminal escape or a line break in it would
		// act on the operator's terminal or forge a line of the listing.
		out = append(out, Event{Node: host, Type: typ, Reason: p.reason, Message: clip(status.Printable(strings.Join(p.parts, "; ")))})
	}
	return out
}

// ReasonSwapStep is the reason of the Events of a swap acting carries out.
const ReasonSwapStep = "SwapStep"

// SwapChanges are the Events of what a swap did from the journal before to
// the journal after: one for each line its history gained, on the host the
// line is about (the standby for admit, promote, stabilise and the undoing
// of its admission; the leaving voter for the others; both for the swap's
// opening and its end). A step that failed, an abort and a halt are
// Warnings.
func SwapChanges(before, after *acting.Journal) []Event {
	if after == nil {
		return nil
	}
	from := 0
	if before != nil && before.PlanID == after.PlanID && before.Started.Equal(after.Started) {
		from = min(len(before.History), len(after.History))
	}
	var out []Event
	for _, e := range after.History[from:] {
		typ := corev1.EventTypeNormal
		if e.State == string(acting.StateFailed) || e.State == string(acting.PhaseAborting) || e.State == string(acting.PhaseHalted) {
			typ = corev1.EventTypeWarning
		}
		what := "swap"
		if after.Kind == acting.KindMoveLeader {
			what = "move-leader"
		}
		msg := fmt.Sprintf("fleet-role %s %s (%s): %s %s", what, after.PlanID, after.Moves(), e.Step, e.State)
		if e.Cause != "" {
			msg += " (" + e.Cause + ")"
		}
		if c := after.Command; c != nil && e.State == string(acting.StateRunning) && c.Seq == after.Seq {
			msg += fmt.Sprintf("; %s's actuator asked: %s", c.Host, c.Verb)
		}
		for _, host := range swapHosts(after, e.Step) {
			out = append(out, Event{Node: host, Type: typ, Reason: ReasonSwapStep, Message: clip(status.Printable(msg))})
		}
	}
	return out
}

// swapHosts are the hosts a journal line is about.
func swapHosts(j *acting.Journal, step string) []string {
	switch step {
	case string(acting.StepAdmit), string(acting.StepPromote), string(acting.StepStabilise), string(acting.UndoRemoveIn), string(acting.UndoStandbyIn):
		return []string{j.In.Node}
	case string(acting.StepPrewrite), string(acting.StepMoveLeader), string(acting.StepRemove), string(acting.StepSettle), string(acting.UndoRestoreOut):
		return []string{j.Out.Node}
	}
	if j.In.Node == "" {
		return []string{j.Out.Node}
	}
	return []string{j.Out.Node, j.In.Node}
}

func verdictReason(v status.Verdict) string {
	switch v {
	case status.Fit:
		return ReasonFit
	case status.Unfit:
		return ReasonUnfit
	}
	return ReasonUnknown
}

// clip cuts a message to MaxMessageBytes at a character boundary.
func clip(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	const more = "…"
	n := MaxMessageBytes - len(more)
	for n > 0 && !isStart(s[n]) {
		n--
	}
	return s[:n] + more
}

func isStart(b byte) bool { return b&0xC0 != 0x80 }

// Observe records the Events from prev to cur on the Nodes of nodes; a
// host whose Node is not among them gets none. A nil Recorder records
// nothing.
func (r *Recorder) Observe(prev, cur *status.Status, nodes []corev1.Node) {
	if r == nil {
		return
	}
	r.record(Changes(prev, cur), nodes)
}

// ObserveSwap records the Events of the steps a swap took from the journal
// before to the journal after (nil before: the swap just opened).
func (r *Recorder) ObserveSwap(before, after *acting.Journal, nodes []corev1.Node) {
	if r == nil {
		return
	}
	r.record(SwapChanges(before, after), nodes)
}

// record records events on the Nodes of nodes; a host whose Node is not
// among them gets none.
func (r *Recorder) record(events []Event, nodes []corev1.Node) {
	if len(events) == 0 {
		return
	}
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	for _, e := range events {
		n := byName[e.Node]
		if n == nil {
			continue
		}
		// The reference names the Node by kind, name and UID, which is
		// what kubectl describe node looks Events up by.
		r.enqueue(r.event(n, e.Type, e.Reason, e.Message))
	}
}
