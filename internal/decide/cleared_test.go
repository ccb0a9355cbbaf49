package decide_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
)

// One slow voter of five: the attribution implicates it alone, and the four
// others, unfit only by their links to it, are cleared: each says so beside
// its verdict, and the tolerance shown first counts only the slow voter as
// lost (5 voters, quorum 3: 1), with every unfit voter counted (0) beside
// it (docs/status.md, "Failure tolerance").
func TestOneSlowVoterOfFiveClearsTheOthers(t *testing.T) {
	f := votersFleet(t, 5)
	f.slowHost("charlie")
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if !slices.Equal(st.Decision.Implicated, []string{"charlie"}) {
		t.Fatalf("implicated %v, want [charlie]", st.Decision.Implicated)
	}
	for _, h := range st.Hosts {
		if h.Role != status.RoleVoter {
			if h.UnfitByLinksTo != nil {
				t.Errorf("%s (%s) is cleared: only voters are", h.Name, h.Role)
			}
			continue
		}
		want := []string{"charlie"}
		if h.Name == "charlie" {
			want = nil
		}
		if h.Verdict != status.Unfit || !slices.Equal(h.UnfitByLinksTo, want) {
			t.Errorf("%s: %s, unfit by links to %v; want unfit, by links to %v", h.Name, h.Verdict, h.UnfitByLinksTo, want)
		}
	}
	ft := st.FailureTolerance
	if ft.Attributed != 1 || ft.Tolerance != 0 || ft.Cleared != 4 || ft.Unfit != 5 {
		t.Errorf("tolerance %+v, want attributed 1, tolerance 0, 4 of 5 unfit cleared", ft)
	}
	var table strings.Builder
	if err := st.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unfit: its link to charlie", "failure tolerance 1 (0 counting the 4 voters unfit only by their links to an implicated voter as lost"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// A voter slow to the implicated one and slow itself (its WAL fsyncs over
// etcd's limit) is not cleared: a reading of its own speaks against it.
func TestAVoterUnfitByItsOwnReadingIsNotCleared(t *testing.T) {
	f := votersFleet(t, 5)
	f.slowHost("charlie")
	f.host("alpha").slowWAL = true
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	for _, h := range st.Hosts {
		if h.Name == "alpha" && h.UnfitByLinksTo != nil {
			t.Errorf("alpha, unfit by its own WAL fsyncs too, is cleared by links to %v", h.UnfitByLinksTo)
		}
	}
	if ft := st.FailureTolerance; ft.Cleared != 3 || ft.Attributed != 0 {
		t.Errorf("tolerance %+v, want 3 cleared (bravo, delta, echo) and attributed 0 (charlie and alpha lost of 5, quorum 3)", ft)
	}
}

// With every link slow no voter is implicated (the network, not a host):
// nobody is cleared, and the two figures are one.
func TestNothingClearedWithoutAnImplicatedVoter(t *testing.T) {
	f := votersFleet(t, 3)
	for _, a := range []string{"alpha", "bravo", "charlie"} {
		for _, b := range []string{"alpha", "bravo", "charlie"} {
			if a < b {
				f.slow[pairOf(a, b)] = 0.4
			}
		}
	}
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if len(st.Decision.Implicated) != 0 {
		t.Fatalf("implicated %v, want none when every link between voters is slow", st.Decision.Implicated)
	}
	if ft := st.FailureTolerance; ft.Cleared != 0 || ft.Attributed != ft.Tolerance {
		t.Errorf("tolerance %+v: nothing cleared, attributed = tolerance", ft)
	}
}

// A document written before the attributed tolerance reads with it equal to
// the tolerance, never under it.
func TestAnOlderDocumentsAttributedTolerance(t *testing.T) {
	doc := `{"schema":"fleet-role.io/status/v1","form":"full","generated_at":"2026-12-03T12:00:00Z","hosts":[],"decision":{"action":"none","reasons":[]},` +
		`"failure_tolerance":{"voters":3,"quorum":2,"unfit":0,"unknown":0,"tolerance":1,"optimistic_tolerance":1,"design_tolerance":1},"links":[],"memory":{},"records":{}}`
	st, err := status.UnmarshalStatus([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if st.FailureTolerance.Attributed != 1 {
		t.Errorf("attributed %d, want the tolerance 1", st.FailureTolerance.Attributed)
	}
}
