package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The standby that comes in (docs/limits.md): two of five voters slow,
// bravo (named by the last decision, so the one that goes) and charlie,
// which stays.
// standby-1's path to charlie is slow too, and its other connects have the
// most headroom; standby-2 is slow to no voter, with its connects to every
// voter at connect seconds. A standby slow to no voter that stays comes
// first whatever its headroom: standby-2 while it is fit (at the connect
// limit, 250 ms, and just under), standby-1 only once standby-2 is unfit
// (just over the limit) or slow to charlie as well, and then the candidate
// says which slow links the new voter set keeps.
func TestTheCleanStandbyComesFirst(t *testing.T) {
	limit := 0.25 // election_timeout 5 s / 20
	for _, c := range []struct {
		name          string
		connect       float64 // standby-2's connect to every voter but charlie's slow path
		slowToCharlie bool    // standby-2's path to charlie slow too
		want          string
		wantText      string
	}{
		{"clean standby well under the limit", 0.1, false, "standby-2", "standby-2 is fit"},
		{"clean standby just under the limit", limit - 1e-6, false, "standby-2", "standby-2 is fit"},
		{"clean standby at the limit", limit, false, "standby-2", "standby-2 is fit"},
		{"clean standby just over the limit", limit + 1e-6, false, "standby-1", "keeps the slow links alpha-charlie, charlie-delta, charlie-echo, charlie-standby-1"},
		{"no clean standby", 0.1, true, "standby-1", "keeps the slow links alpha-charlie, charlie-delta, charlie-echo, charlie-standby-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := votersFleet(t, 5)
			for _, h := range []string{"alpha", "charlie", "delta", "echo", "standby-1", "standby-2"} {
				f.slow[pairOf("bravo", h)] = 0.2
			}
			for _, h := range []string{"alpha", "delta", "echo", "standby-1"} {
				f.slow[pairOf("charlie", h)] = 0.2
			}
			if c.slowToCharlie {
				f.slow[pairOf("charlie", "standby-2")] = 0.2
			}
			f.host("standby-2").connectMod = func(_, _ int, to string, x *entry.Connect) {
				if to != "bravo" && (to != "charlie" || !c.slowToCharlie) {
					*x = entry.Connect{Seconds: c.connect}
				}
			}
			st := decideSteady(f.input(t, namedBefore(settled(f, 2*time.Hour), "bravo")))
			wantSwap(t, st, "bravo", c.want)
			r := decisionReason(t, st, status.StepCandidate, c.want)
			if !strings.Contains(r.Detail, c.wantText) {
				t.Fatalf("%s's candidate reason: %s", c.want, r.Detail)
			}
			if c.want == "standby-2" {
				// The one passed over says why.
				if r := decisionReason(t, st, status.StepCandidate, "standby-1"); !r.OK || !strings.Contains(r.Detail, "a fit standby slow to no voter that would remain comes first") {
					t.Fatalf("standby-1's candidate reason: %+v", r)
				}
			}
		})
	}
}
