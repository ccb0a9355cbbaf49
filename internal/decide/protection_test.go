package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The records unprotected (docs/records.md, Fail closed): with the admission
// policy off any probe's token may write every record, so a probe writes a
// withheld marker in its own, and another may overwrite it with samples of
// its making. Once the controller has seen a marker (in the record as it is,
// or in any version its watch delivered), every swap is held and the host
// stays unknown, whatever its record holds now, until every recording host
// has written its samples after the last sign and no sign has come for
// entry_unchanged; the controller's own read of the policy not in force is
// a sign too. A fleet with a slow voter (alpha) whose swap is published
// while the records are protected.
func TestUnprotectedRecordsHoldEverySwap(t *testing.T) {
	f, stale, st := slowAlpha(t)
	if st.Memory.UnprotectedAt != (time.Time{}) || hasSignal(st, status.GateProtected) {
		t.Fatalf("protected records latched: memory %v, reasons %+v", st.Memory.UnprotectedAt, st.Decision.Reasons)
	}

	// bravo's marker was seen since the last decision, and another probe
	// has since written fit samples over it: the record as it is reads fit.
	in := f.input(t, everyRecordChanged(st))
	in.Now = in.Now.Add(f.s.SamplePeriod)
	in.Protection.Markers = []string{"bravo"}
	at := in.Now
	st = decide.Decide(in)
	wantNone(t, st, status.GateProtected)
	wantVerdict(t, st, "bravo", status.Unknown)
	if !heldHost(t, st, "bravo") {
		t.Fatalf("bravo's reasons: %+v", hostOf(t, st, "bravo").Reasons)
	}
	if m := st.Memory; !m.UnprotectedAt.Equal(at) || len(m.Unprotected) != 1 || m.Unprotected[0] != "bravo" {
		t.Fatalf("memory: unprotected at %v, hosts %v; want %v, [bravo]", m.UnprotectedAt, m.Unprotected, at)
	}
	gate := decisionReason(t, st, status.GateProtected, "")
	if !strings.Contains(gate.Detail, "a withheld marker in the record of bravo") || *gate.Limit != 7 {
		t.Fatalf("gate: %+v", gate)
	}

	// Every record written after the sign, at, just under and just over
	// entry_unchanged from it: held until it, free from it on.
	for _, c := range []struct {
		after time.Duration
		held  bool
	}{{stale - time.Millisecond, true}, {stale, false}, {stale + time.Millisecond, false}} {
		in := f.input(t, everyRecordChanged(st))
		in.Now = at.Add(c.after)
		got := decide.Decide(in)
		if hasSignal(got, status.GateProtected) != c.held || got.Memory.UnprotectedAt.IsZero() == c.held {
			t.Fatalf("%v after the sign, every record written since: gate %v, memory %v; want held %v", c.after, hasSignal(got, status.GateProtected), got.Memory.UnprotectedAt, c.held)
		}
		if c.held {
			wantVerdict(t, got, "bravo", status.Unknown)
			continue
		}
		// The decision that clears the latch still held bravo's samples
		// (its judging comes first); the next judges them.
		next := f.input(t, everyRecordChanged(got))
		next.Now = in.Now.Add(f.s.SamplePeriod)
		if after := decide.Decide(next); heldHost(t, after, "bravo") || hostOf(t, after, "bravo").Verdict == status.Unknown {
			t.Fatalf("a period after the latch cleared, bravo is still held: %+v", hostOf(t, after, "bravo").Reasons)
		}
	}

	// A record not written since the sign holds it, however long ago the
	// sign was: the previous status's observations are this decision's
	// records, so none reads as changed.
	in = f.input(t, &st)
	in.Now = at.Add(10 * stale)
	got := decide.Decide(in)
	gate = decisionReason(t, got, status.GateProtected, "")
	if *gate.Value != 0 || !strings.Contains(gate.Detail, "waiting on alpha, bravo, charlie, delta, echo, standby-1, standby-2") {
		t.Fatalf("no record written since the sign: %+v", gate)
	}

	// bravo's record is the marker itself: a sign at every decision.
	f.host("bravo").lie = func(e *entry.Entry) { *e = entry.Entry{Node: "bravo", Withheld: "the API server admitted ..."} }
	in = f.input(t, everyRecordChanged(st))
	in.Now = at.Add(10 * stale)
	got = decide.Decide(in)
	wantNone(t, got, status.GateProtected)
	if !got.Memory.UnprotectedAt.Equal(in.Now) {
		t.Fatalf("a marker in the record as it is: memory %v, want %v", got.Memory.UnprotectedAt, in.Now)
	}
	f.host("bravo").lie = nil
}

// The controller's own read of the admission policy: not in force, it is a
// sign at every decision, and the latch stays however the records read;
// read in force again, the latch clears entry_unchanged after the last
// sign, every record written since. Unread, the records alone speak.
func TestPolicyReadNotInForceHoldsEverySwap(t *testing.T) {
	f, stale, prev := slowAlpha(t)

	off := decide.Protection{Checked: true, Why: "the binding fleet-role-probe-records is gone"}
	var st status.Status
	var last time.Time
	for i := range 4 {
		in := f.input(t, everyRecordChanged(prev))
		in.Now = baseNow.Add(time.Duration(i+1) * stale)
		in.Protection = off
		st = decide.Decide(in)
		wantNone(t, st, status.GateProtected)
		if r := decisionReason(t, st, status.GateProtected, ""); !strings.Contains(r.Detail, "the controller read the admission policy not in force: the binding fleet-role-probe-records is gone") {
			t.Fatalf("gate: %+v", r)
		}
		// No host's own samples are held: no marker was seen.
		if heldHost(t, st, "bravo") || hostOf(t, st, "bravo").Verdict == status.Unknown {
			t.Fatalf("bravo held with no marker seen: %+v", hostOf(t, st, "bravo").Reasons)
		}
		prev, last = st, in.Now
	}
	for _, c := range []struct {
		after time.Duration
		held  bool
	}{{stale - time.Millisecond, true}, {stale, false}} {
		in := f.input(t, everyRecordChanged(prev))
		in.Now = last.Add(c.after)
		in.Protection = decide.Protection{Checked: true, InForce: true}
		got := decide.Decide(in)
		if hasSignal(got, status.GateProtected) != c.held {
			t.Fatalf("policy in force %v after the last read of it off: gate %v, want %v", c.after, hasSignal(got, status.GateProtected), c.held)
		}
	}
	// Unread (no reader): the latch carried, cleared as the records allow.
	in := f.input(t, everyRecordChanged(prev))
	in.Now = last.Add(stale)
	if got := decide.Decide(in); hasSignal(got, status.GateProtected) {
		t.Fatalf("the policy unread, every record written entry_unchanged after the last sign: still held: %+v", got.Decision.Reasons)
	}
}

// After a failover the latch is read on the new writer's clock: its age is
// kept, so a clock ahead does not clear it early.
func TestUnprotectedLatchAcrossWriters(t *testing.T) {
	f := votersFleet(t, 5)
	f.slowHost("alpha")
	stale := f.s.StaleAfter().Duration()
	in := f.input(t, settled(f, 2*time.Hour))
	in.Protection.Markers = []string{"bravo"}
	st := decide.Decide(in)
	// The next writer's clock is an hour ahead; it reads st a period after
	// it was written, by its own clock.
	ahead := time.Hour
	next := f.input(t, everyRecordChanged(st))
	next.PreviousAt = st.GeneratedAt.Add(ahead + f.s.SamplePeriod)
	next.Now = next.PreviousAt
	got := decide.Decide(next)
	if !hasSignal(got, status.GateProtected) {
		t.Fatalf("a writer an hour ahead cleared the latch a period after the sign: %+v", got.Memory)
	}
	next.Now = next.PreviousAt.Add(stale)
	if got := decide.Decide(next); hasSignal(got, status.GateProtected) {
		t.Fatalf("entry_unchanged and a period after the sign by the new clock, every record written: still held")
	}

	// This clock stepped back an hour (no other writer): the sign reads in
	// the future, and the latch holds, from now, rather than drop.
	back := f.input(t, everyRecordChanged(st))
	back.Now = st.GeneratedAt.Add(-time.Hour)
	got = decide.Decide(back)
	if !hasSignal(got, status.GateProtected) || !got.Memory.UnprotectedAt.Equal(back.Now) {
		t.Fatalf("a sign in the future dropped the latch: gate %v, memory %v", hasSignal(got, status.GateProtected), got.Memory.UnprotectedAt)
	}
}

func hasSignal(st status.Status, signal string) bool {
	for _, r := range st.Decision.Reasons {
		if r.Signal == signal {
			return true
		}
	}
	return false
}

// heldHost says whether the host's samples are held for a marker seen while
// the records were unprotected.
func heldHost(t *testing.T, st status.Status, name string) bool {
	t.Helper()
	for _, r := range hostOf(t, st, name).Reasons {
		if r.Signal == status.SignalRecord && strings.Contains(r.Detail, "withheld: its record was a withheld marker while the records were unprotected") {
			return true
		}
	}
	return false
}

// slowAlpha is five voters, alpha slow on every path, and the decision
// that publishes its swap while the records are protected; stale is
// entry_unchanged.
func slowAlpha(t *testing.T) (f *gFleet, stale time.Duration, st status.Status) {
	t.Helper()
	f = votersFleet(t, 5)
	f.slowHost("alpha")
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "alpha", "standby-1")
	return f, f.s.StaleAfter().Duration(), st
}
