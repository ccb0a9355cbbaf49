package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The hysteresis (docs/limits.md, "No flapping"). The attribution rule
// names no host for a stall of the whole machine once every host has written
// the samples the stall slowed; it can name one only while some hosts have
// written their sample of a period and others not yet. So a swap is
// published only at a decision at which every voter's record has changed
// since the first of the consecutive decisions that named the same voter:
// every voter has written at least one sample since, and that state is over.
// The test is the controller's own observation of each record (its digest
// changing, stamped with the decision's time), never the probes' clocks,
// which may disagree with each other. A real slow voter's swap, named at the
// first decision after its window turns it unfit, is published at the first
// decision at which every voter has written again: within a period and a
// half at the controller's two decisions a period (SteadyPeriods).
const steadyBasis = "a swap is published only at a decision at which every voter's record has changed since the first of the consecutive decisions that named the same voter to leave: a stall of the whole machine can name a host only while some hosts have written that period's sample and others not yet, which ends once every voter has written again; the records' changes are the controller's own observations, not the probes' clocks"

// steady is the hysteresis: it carries in mem the voter named to leave and
// the time of the first of the consecutive decisions that named it, and
// holds the swap until every voter's record has been seen changing after
// that time.
func steady(prev *status.Status, now time.Time, voters []*host, out, in string, mem *status.Memory) status.Reason {
	mem.Named, mem.NamedSince, mem.NamedDecisions = out, now, 1
	if p := prev; p != nil && p.Memory.Named == out && p.Memory.NamedDecisions > 0 && !p.Memory.NamedSince.IsZero() && !p.Memory.NamedSince.After(now) {
		mem.NamedSince, mem.NamedDecisions = p.Memory.NamedSince, p.Memory.NamedDecisions+1
	}
	var waiting []string
	written := 0
	for _, v := range voters {
		if v.obs != nil && v.obs.ChangedAt.After(mem.NamedSince) {
			written++
		} else {
			waiting = append(waiting, v.node.Name)
		}
	}
	r := step(status.CodeSwapWaiting, out, steadyBasis, len(waiting) == 0, "")
	if r.OK {
		r.Code = status.CodeSwapSteady
	}
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(written)), num(float64(len(voters))), "voters", settings.AtLeast
	times := "decisions"
	if mem.NamedDecisions == 1 {
		times = "decision"
	}
	since := fmt.Sprintf("%s has been named to leave (for %s) since %s, at %d %s in a row", out, in, mem.NamedSince.Format(time.RFC3339), mem.NamedDecisions, times)
	if r.OK {
		r.Detail = since + "; every voter's record has changed since: published"
	} else {
		r.Detail = fmt.Sprintf("%s; the records of %s have not changed since: held until every voter has written again", since, strings.Join(waiting, ", "))
	}
	return r
}

// tally carries the counters of the memory forward: a flap is a swap
// published at the previous decision (the same voter set) and not at this
// one; a verdict change is a host judged at both with different verdicts.
func tally(prev *status.Status, hosts []*host, d status.Decision, mem *status.Memory) {
	if prev == nil {
		return
	}
	mem.Flaps, mem.VerdictChanges = prev.Memory.Flaps, prev.Memory.VerdictChanges
	p := prev.Decision
	if p.Action == status.ActionSwap && !(d.Action == status.ActionSwap && d.Out == p.Out) && slices.Equal(prev.Memory.Voters, mem.Voters) {
		mem.Flaps++
	}
	was := map[string]status.Verdict{}
	for _, h := range prev.Hosts {
		was[h.Name] = h.Verdict
	}
	for _, h := range hosts {
		if v, ok := was[h.node.Name]; ok && v != "" && v != h.verdict {
			mem.VerdictChanges++
		}
	}
}
