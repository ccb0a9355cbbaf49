package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// WriteTable writes the status for people: one line per host (name, role,
// verdict, samples, and the reason that decides its verdict with its value
// and limit), then the decision and every step that holds it back. Every
// text goes through Printable: what an entry wrote can hold terminal escapes
// and line breaks, and must not forge a row. A reduced document (Form not
// full) says so on its last line, with what was dropped.
func (s Status) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tVERDICT\tSAMPLES\tREASON")
	for _, h := range s.Hosts {
		r, ok := DecidingReason(h)
		why := "-"
		if ok {
			why = Summary(r)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", Printable(h.Name), Printable(string(h.Role)), Printable(VerdictText(h)), h.Samples, Printable(why))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	mode := "dry run: nothing is changed"
	if !s.DryRun {
		mode = "acting"
		if s.Acting != nil {
			mode = "acting " + Printable(s.Acting.Mode)
		}
	}
	d := s.Decision
	var line string
	if d.Action == ActionSwap {
		line = fmt.Sprintf("decision: swap %s out, %s in (%s)", Printable(d.Out), Printable(d.In), mode)
	} else if r, ok := d.DecidingStep(); ok {
		// What holds the swap back, on the decision's own line rather
		// than a dozen lines down among the steps that passed.
		line = fmt.Sprintf("decision: none, held by %s: %s (%s)", Printable(r.Signal), Printable(r.Detail), mode)
	} else {
		line = fmt.Sprintf("decision: none (%s)", mode)
	}
	var b strings.Builder
	b.WriteString(s.FailureTolerance.Sentence() + "\n")
	if s.Timing.Verdict != "" {
		b.WriteString(Printable(s.Timing.Sentence()) + "\n")
	}
	b.WriteString(line + "\n")
	for _, r := range d.Reasons {
		mark := "ok"
		if !r.OK {
			mark = "NO"
		}
		fmt.Fprintf(&b, "  %-3s %s: %s\n", mark, Printable(r.Signal), Printable(r.Detail))
	}
	writeActing(&b, s.Acting)
	if s.Form != "" && s.Form != FormFull {
		fmt.Fprintf(&b, "form: %s, reduced to fit one ConfigMap;", Printable(s.Form))
		for _, x := range s.Dropped {
			fmt.Fprintf(&b, " %d %s", x.Count, Printable(x.Part))
		}
		b.WriteString(" dropped\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DecidingReason is the reason that decides a host's verdict: the one its
// Deciding index names, which Decide sets from the host's judgements (the
// first that makes it unknown, the one furthest over its limit when unfit,
// the one closest to its limit when fit). ok is false when the host has
// no reasons. A document written before the index was published is read
// by the same rule over its reasons, which cannot tell a reason that makes
// the host unknown from one that fails: for an unknown host it is the
// first that is not ok.
func DecidingReason(h Host) (Reason, bool) {
	if i := h.Deciding; i != nil {
		if *i < 0 || *i >= len(h.Reasons) {
			return Reason{}, false
		}
		return h.Reasons[*i], true
	}
	var best *Reason
	bestH := 0.0
	for i := range h.Reasons {
		r := &h.Reasons[i]
		switch h.Verdict {
		case Unknown:
			if !r.OK && best == nil {
				best = r
			}
		case Unfit:
			if !r.OK && (best == nil || headroom(*r) < bestH) {
				best, bestH = r, headroom(*r)
			}
		default:
			if IsMeasure(r.Signal) && r.Value != nil && r.Limit != nil && (best == nil || headroom(*r) < bestH) {
				best, bestH = r, headroom(*r)
			}
		}
	}
	if best == nil {
		return Reason{}, false
	}
	return *best, true
}

// DecidingStep is the step that decides the decision's action, by its
// Deciding index: for a swap, the replace step (the voter taken out, and
// why it); otherwise the step that holds the swap back. ok is false when
// the document keeps no such step.
func (d Decision) DecidingStep() (Reason, bool) {
	if i := d.Deciding; i != nil && *i >= 0 && *i < len(d.Reasons) {
		return d.Reasons[*i], true
	}
	return Reason{}, false
}

// Summary renders a reason in one line: "connect bravo: 812ms, must be at most
// 250ms", or its detail when it has no numbers.
func Summary(r Reason) string {
	what := r.Signal
	if r.Subject != "" {
		what += " " + r.Subject
	}
	if r.Value == nil || r.Limit == nil {
		return what + ": " + r.Detail
	}
	return fmt.Sprintf("%s: %s, must be %s", what, FormatValue(*r.Value, r.Unit), limitPhrase(r.Rule, *r.Limit, r.Unit))
}

// writeActing writes what acting makes of the decision: the mode, the
// plan's ID and state, then a line per step with its guards' count and the
// first that does not hold.
func writeActing(b *strings.Builder, a *acting.Status) {
	if a == nil {
		return
	}
	writeJournal(b, a)
	p := a.Plan
	if p == nil {
		fmt.Fprintf(b, "acting: %s, no swap to carry out\n", Printable(a.Mode))
		return
	}
	state := "ready: every guard of its first step holds but the approval"
	if !p.Ready {
		state = "not ready"
	}
	if p.Kind == acting.KindMoveLeader {
		fmt.Fprintf(b, "acting: %s, plan %s: %s (no standby to swap it for); %s\n", Printable(a.Mode), Printable(p.ID), Printable(acting.Parties(p.Kind, p.Out.Node, "")), state)
	} else {
		fmt.Fprintf(b, "acting: %s, plan %s: %s out, %s in (%s standby); %s\n", Printable(a.Mode), Printable(p.ID), Printable(p.Out.Node), Printable(p.In.Node), Printable(string(p.Standby)), state)
	}
	if p.Remedy != "" {
		fmt.Fprintf(b, "  first: %s\n", Printable(p.Remedy))
	}
	for _, st := range p.Steps {
		// The guard named is the first that fails, the approval last:
		// what holds a plan that is not ready comes before what every
		// plan waits for.
		held := 0
		var first, approval string
		for _, g := range st.Guards {
			if g.OK {
				continue
			}
			held++
			text := "; " + Printable(string(g.Code)) + ": " + Printable(g.Detail)
			switch {
			case g.Code == acting.GuardApproval:
				approval = text
			case first == "":
				first = text
			}
		}
		if first == "" {
			first = approval
		}
		limit := "no deadline"
		if st.Deadline.Seconds > 0 {
			limit = fmt.Sprintf("deadline %v", time.Duration(st.Deadline.Seconds*float64(time.Second)))
		}
		fmt.Fprintf(b, "  %-11s %-8s %s on %s, %d of %d guards hold, %s%s\n", st.Name, st.State, st.Actor, Printable(st.Host),
			len(st.Guards)-held, len(st.Guards), limit, first)
	}
}

// journalKind names what a journal carries: "swap", or "move-leader".
func journalKind(j *acting.Journal) string {
	if j.Kind == "" {
		return string(acting.KindSwap)
	}
	return string(j.Kind)
}

// writeJournal says where the swap under way, or the last one, stands, and
// why the executor did not run, when it did not.
func writeJournal(b *strings.Builder, a *acting.Status) {
	if st := a.Stall; st != nil {
		fmt.Fprintf(b, "acting stalled: %s: %s\n", st.Code, Printable(st.Detail))
	}
	j := a.Journal
	if j == nil {
		return
	}
	fmt.Fprintf(b, "%s %s: %s; %s, approved by %s, started %s, term %d\n", journalKind(j), Printable(j.PlanID), Printable(j.Moves()),
		j.Phase, Printable(j.ApprovedBy), j.Started.UTC().Format(time.RFC3339), j.Term)
	if cur := j.Current(); cur != nil {
		line := fmt.Sprintf("  step %s %s", cur.Name, cur.State)
		if cur.Deadline != nil {
			line += ", deadline " + cur.Deadline.UTC().Format(time.RFC3339)
		}
		if cur.Held != "" {
			line += ", held by " + Printable(string(cur.Held))
		}
		if c := j.Command; c != nil {
			line += fmt.Sprintf("; asked %s's actuator: %s (command %d)", Printable(c.Host), c.Verb, c.Seq)
		}
		b.WriteString(line + "\n")
	}
	if ab := j.Abort; ab != nil {
		fmt.Fprintf(b, "  aborted at %s (%s); left to undo: %v\n", ab.Step, Printable(ab.Cause), ab.Undo)
	}
	if j.Halt != "" {
		fmt.Fprintf(b, "  halted (%s): nothing more is changed; the operator decides (docs/acting.md, \"A halted swap\")\n", Printable(j.Halt))
	}
	if j.Ended != nil {
		fmt.Fprintf(b, "  ended %s\n", j.Ended.UTC().Format(time.RFC3339))
	}
}
