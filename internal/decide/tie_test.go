package decide_test

import (
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
)

// One slow link between two unpinned voters: either end explains it. The
// end unfit by a reading of its own goes, since a host slow itself measures
// its own links slow (a starved probe times its connects late), whatever
// the margins of the link say: the end whose timer wakes at the wakeup_late
// limit (0.5 s, not under it) is named, the other end's just under it
// (0.499 s) is fit by its own readings. Without a starved end the margins
// pick charlie; starving bravo instead turns the choice.
func TestOneSlowLinkTheEndSlowItselfGoes(t *testing.T) {
	for _, c := range []struct {
		starved, other string
	}{{"charlie", "bravo"}, {"bravo", "charlie"}} {
		t.Run(c.starved, func(t *testing.T) {
			f := votersFleet(t, 3)
			f.slow[pairOf("bravo", "charlie")] = 0.4
			f.host(c.starved).late = func(int, int) float64 { return 0.5 }
			f.host(c.other).late = func(int, int) float64 { return 0.499 }
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			if st.Decision.Action != decide.ActionSwap || st.Decision.Out != c.starved {
				t.Fatalf("decision %s %s, want a swap of %s out", st.Decision.Action, st.Decision.Out, c.starved)
			}
		})
	}
}

// One slow link between two unpinned voters, neither slow itself: the voter
// the last decision named stays named, whichever end the margins or the
// names would pick, so that the swap does not turn from one end to the other
// between decisions.
func TestOneSlowLinkKeepsTheVoterNamed(t *testing.T) {
	for _, named := range []string{"bravo", "charlie"} {
		t.Run(named, func(t *testing.T) {
			f := votersFleet(t, 3)
			f.slow[pairOf("bravo", "charlie")] = 0.4
			st := decide.Decide(f.input(t, namedBefore(settled(f, 2*time.Hour), named)))
			if st.Decision.Action != decide.ActionSwap || st.Decision.Out != named {
				t.Fatalf("decision %s %s, want a swap of %s out", st.Decision.Action, st.Decision.Out, named)
			}
		})
	}
}
