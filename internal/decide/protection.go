package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Protection is what the controller itself knows of the guard that holds
// each probe to its own record (docs/records.md, "Fail closed"), beside
// what the records say of it.
type Protection struct {
	// Checked: the controller read the admission policy and its binding,
	// and InForce says whether they are as the install makes them; Why
	// says what is not, when they are not. Unchecked (no reader, as the
	// demo's memory store has, or a read that failed) leaves the records
	// alone to speak.
	Checked, InForce bool
	Why              string
	// Markers names the hosts whose record the controller saw as a
	// withheld marker since its previous decision, in any version its
	// watch delivered: a marker another probe overwrote within a period
	// is seen all the same.
	Markers []string
}

const protectedBasis = "fail closed: with the admission policy fleet-role-probe-records off, any probe's token may write every record, so a record written since may be another's and none is trusted to name a swap; the records are trusted again once the controller reads the policy in force, no probe has written a withheld marker for entry_unchanged, and every recording host has written its samples after the last sign (docs/records.md, Fail closed)"

// protection is the latch of this decision: set when the records were seen
// unprotected (a marker, or the controller's own read), carried until every
// probe reports the policy back.
type protection struct {
	at   time.Time // the last sign; zero when protected
	why  string    // the controller's own reading, when it was the sign
	held []string  // hosts seen withheld since the latch was set
	// reported and recording count the recording hosts that wrote their
	// samples after the last sign, and all of them; waiting names the
	// others.
	reported, recording int
	waiting             []string
}

// heldUnprotected names the hosts whose samples are not trusted before
// they are judged: those whose marker the previous decision held, while it
// was latched, and those whose marker was seen since.
func heldUnprotected(in Input) map[string]bool {
	held := map[string]bool{}
	if p := in.Previous; p != nil && !p.Memory.UnprotectedAt.IsZero() {
		for _, h := range p.Memory.Unprotected {
			held[h] = true
		}
	}
	for _, h := range in.Protection.Markers {
		held[h] = true
	}
	return held
}

// protect carries the latch from the previous decision's memory into mem:
// set at now on a sign (a marker in a record, in any version seen, or the
// policy read not in force), cleared once no sign has come for
// entry_unchanged, the policy reads in force (when the controller can
// read it) and every recording host has written its samples after the last
// sign. It returns the latch for the gate.
func protect(prev *status.Status, in Input, hosts []*host, mem *status.Memory, now time.Time, stale time.Duration) protection {
	var p protection
	if prev != nil && !prev.Memory.UnprotectedAt.IsZero() {
		// A sign dated after now (this clock stepped back) is taken as
		// now: the latch fails closed, where the other memories' times in
		// the future are dropped.
		p.at, p.why = prev.Memory.UnprotectedAt.UTC(), prev.Memory.UnprotectedWhy
		if p.at.After(now) {
			p.at = now
		}
		p.held = slices.Clone(prev.Memory.Unprotected)
	}
	seen := slices.Clone(in.Protection.Markers)
	for _, h := range hosts {
		if h.withheld {
			seen = append(seen, h.node.Name)
		}
	}
	own := in.Protection.Checked && !in.Protection.InForce
	if len(seen) > 0 || own {
		p.at = now
		if own {
			p.why = in.Protection.Why
		}
		p.held = append(p.held, seen...)
	}
	slices.Sort(p.held)
	p.held = slices.Compact(p.held)
	if p.at.IsZero() {
		return p
	}
	for _, h := range hosts {
		if !h.hasEntry {
			continue
		}
		p.recording++
		if h.obs != nil && h.obs.ChangedAt.After(p.at) && h.samples > 0 && !h.withheld {
			p.reported++
		} else {
			p.waiting = append(p.waiting, h.node.Name)
		}
	}
	quiet := now.Sub(p.at) >= stale
	if quiet && !own && p.reported == p.recording {
		return protection{}
	}
	mem.UnprotectedAt, mem.UnprotectedWhy, mem.Unprotected = p.at, p.why, p.held
	return p
}

// protectedGate is the gate's reason while the records are unprotected; ok
// is false when it holds (there is no reason at all while they are
// protected, so that a protected fleet's decision reads as before).
func protectedGate(j *limits, p protection) (status.Reason, bool) {
	if p.at.IsZero() {
		return status.Reason{}, false
	}
	var sign string
	switch {
	case p.why != "":
		sign = "the controller read the admission policy not in force: " + status.Clip(p.why)
	case len(p.held) > 0:
		sign = "a withheld marker in the record of " + strings.Join(p.held, ", ")
	default:
		sign = "a withheld marker"
	}
	waiting := "every recording host has"
	if len(p.waiting) > 0 {
		waiting = "waiting on " + strings.Join(p.waiting, ", ")
	}
	r := step(status.CodeRecordsUnprotected, "", protectedBasis, false, fmt.Sprintf(
		"the records were seen unprotected at %s (%s): no swap until the policy reads in force, no marker comes for entry_unchanged %s, and every recording host has written its samples after it: %d of %d have (%s)",
		p.at.Format(time.RFC3339), sign, j.stale.Duration(), p.reported, p.recording, waiting))
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(p.reported)), num(float64(p.recording)), "hosts", settings.AtLeast
	return r, true
}
