package mesh

import (
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/lab/fault/campaign"
)

// A failed score is said in lines CI's tail shows: the totals, and each
// fault that is not ok with its outcome and notes; an ok fault is not.
func TestWhatFailedNamesTheFault(t *testing.T) {
	res := &campaign.Result{
		Totals: campaign.Totals{Faults: 2, SwapWorthy: 1, Missed: 1},
		Faults: []campaign.Fault{
			{Spec: campaign.Spec{Kind: campaign.VoterDisk, Host: "voter-1"}, Outcome: "missed", Load: 7.5, Notes: []string{"published at 6.2 periods, bound 5"}},
			{Spec: campaign.Spec{Kind: campaign.Blip, Host: "voter-2"}, Outcome: "held", OK: true},
		},
	}
	got := whatFailed(res)
	for _, want := range []string{"totals: 0 wrong swaps, 0 flaps, 1 missed, 0 unrecovered (of 2 faults, 1 swap-worthy", "fault 1 ", "voter-1", ": missed, load 7.5; published at 6.2 periods, bound 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("whatFailed says\n%s\nwithout %q", got, want)
		}
	}
	if strings.Contains(got, "fault 2") {
		t.Errorf("whatFailed names the ok fault:\n%s", got)
	}
}
