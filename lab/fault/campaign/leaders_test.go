package campaign

import (
	"testing"
	"time"
)

// Each fault counts the leader changes from its start to its recovery (or
// to the next fault's start when it never recovered), as the member that
// saw the most counts; the rest of the campaign from the baseline on is
// clean, its changes counted apart. A change at a span's first instant is
// in it, at its last is in the next.
func TestCountLeaderChanges(t *testing.T) {
	faults := []Fault{
		{Spec: Spec{Kind: VoterDelay}, Start: at(100), Recovered: at(160)},
		{Spec: Spec{Kind: VoterPause}, Start: at(200)}, // never recovered
		{Spec: Spec{Kind: Blip}, Start: at(300), Recovered: at(320)},
	}
	changes := map[string][]time.Time{
		// voter-1 saw every election; voter-2, cut off, fewer.
		"voter-1": {at(50), at(100), at(159.9), at(160), at(250), at(299), at(330)},
		"voter-2": {at(100), at(250), at(251)},
		// Before the baseline: the fleet's forming, not counted.
		"voter-3": {at(5), at(6), at(7)},
	}
	during, cleans, own := CountLeaderChanges(faults, changes, nil, at(10), at(400))
	clean := len(cleans)
	want := []int{2, 2, 0} // [100,160): 100, 159.9; [200,300): voter-2's 250, 251; [300,320): none
	for i, f := range faults {
		if f.LeaderChanges != want[i] {
			t.Errorf("fault %d (%s): %d leader changes, want %d", i+1, f.Kind, f.LeaderChanges, want[i])
		}
	}
	// Clean: [10,100): 50; [160,200): 160; [320,400): 330. 299 falls in
	// the unrecovered fault's span, which runs to the next start.
	if during != 4 || clean != 3 || own != 0 {
		t.Errorf("%d during the faults and %d between, want 4 and 3", during, clean)
	}
	// Each change between faults says after which fault it came, and how
	// far into its clean span.
	want2 := []CleanChange{{At: at(50), After: 0, Since: Duration(40 * time.Second)}, {At: at(160), After: 1, Since: 0}, {At: at(330), After: 3, Since: Duration(10 * time.Second)}}
	for i, c := range cleans {
		if i >= len(want2) || !c.At.Equal(want2[i].At) || c.After != want2[i].After || c.Since != want2[i].Since {
			t.Errorf("clean change %d: %+v, want %+v", i, c, want2)
		}
	}
	rows := ByKind(faults)
	if len(rows) != 3 || rows[0].LeaderChanges != 2 || rows[1].LeaderChanges != 2 || rows[2].LeaderChanges != 0 {
		t.Errorf("per kind: %+v", rows)
	}
}

// The campaign's own moves of leadership are not elections: each takes
// out one change a member saw from the move's request to ownMoveSeen after
// it returned, at either end and not past them; an election beside a move,
// or a second change in its window, still counts.
func TestOwnMovesAreNotCounted(t *testing.T) {
	faults := []Fault{{Spec: Spec{Kind: VoterDelay, Leader: true}, Start: at(100), Recovered: at(160)}}
	seen := ownMoveSeen.Seconds()
	moves := []Interval{
		{From: at(99), To: at(99.5)},   // before the fault: its voter made leader
		{From: at(170), To: at(170.5)}, // after it: back to the pinned voter
		{From: at(180), To: at(180.5)}, // a move whose change no member saw
	}
	changes := map[string][]time.Time{
		// At the first move's request, and at the second's last instant.
		"voter-1": {at(99), at(170.5 + seen)},
		// At the second's first instant; then one just past its window,
		// and one beside the first move that its change already took.
		"voter-2": {at(99.2), at(99.3), at(170), at(170.5 + seen + 0.001)},
	}
	during, clean, own := CountLeaderChanges(faults, changes, moves, at(10), at(400))
	if own != 2 {
		t.Errorf("%d moves left out, want 2 (the third was never seen)", own)
	}
	// voter-2 keeps 99.3 (a second change in the first move's window) and
	// the one past the second's window: two clean changes.
	if during != 0 || len(clean) != 2 || !clean[0].At.Equal(at(99.3)) || !clean[1].At.Equal(at(170.5+seen+0.001)) {
		t.Errorf("%d during, clean %+v; want none during and the two changes no move explains", during, clean)
	}
	// A change between faults fails the campaign; none passes it.
	scored := []Fault{{OK: true}}
	if (Totals{Clean: clean}).OK(scored) || !(Totals{}).OK(scored) {
		t.Error("a leader change between faults does not fail the campaign, or none fails it")
	}
	if changes["voter-1"][0] != at(99) {
		t.Error("the changes given were altered")
	}
}

// A member's counter is read as rises from its first reading; a reading
// below the last (the member restarted) starts again from it.
func TestEtcdWatchCountsRises(t *testing.T) {
	w := &etcdWatch{spans: newSpans(), elections: map[string][]time.Time{}, last: map[string]float64{}}
	w.count("v", at(1), 3) // baseline: a member counts its first leader
	w.count("v", at(2), 3) // no change
	w.count("v", at(3), 5) // two changes between polls
	w.count("v", at(4), 1) // restarted
	w.count("v", at(5), 2) // one change since
	got := w.leaderChanges()["v"]
	if len(got) != 3 || !got[0].Equal(at(3)) || !got[1].Equal(at(3)) || !got[2].Equal(at(5)) {
		t.Fatalf("changes at %v, want two at 3 and one at 5", got)
	}
	// A rise no poll could see is held to one change per millisecond of
	// the poll interval: at it, and over it.
	limit := int(etcdWatchEvery / time.Millisecond)
	w.count("u", at(1), 0)
	w.count("u", at(2), float64(limit))
	w.count("u", at(3), float64(limit)+1e12)
	if n := len(w.leaderChanges()["u"]); n != 2*limit {
		t.Fatalf("%d changes recorded, want %d (%d a poll)", n, 2*limit, limit)
	}
}

// The longest a voter's record went unwritten in a fault counts from its
// start and to its end, and writes outside it do not count.
func TestLongestUnwritten(t *testing.T) {
	w := &recordWatch{writes: map[string][]time.Time{
		"voter-1": {at(90), at(101), at(103), at(105), at(107), at(109)},
		"voter-2": {at(95), at(102), at(106.5), at(130)},
	}}
	faults := []Fault{{Start: at(100), End: at(110)}, {Start: at(120), End: at(125)}}
	w.longestUnwritten(faults)
	// voter-2: 102 to 106.5 (4.5 s); its 95 is before the start.
	if u := faults[0].Unwritten; u.Voter != "voter-2" || u.Longest != Duration(4500*time.Millisecond) {
		t.Errorf("first fault: %+v, want voter-2 for 4.5 s", u)
	}
	// No write inside: the whole fault.
	if u := faults[1].Unwritten; u.Longest != Duration(5*time.Second) {
		t.Errorf("second fault: %+v, want 5 s", u)
	}
}
