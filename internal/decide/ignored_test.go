package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/status"
)

// A record of a node that is neither a voter nor eligible (a node that
// joined with the join token and registered itself, say) is counted with
// the records and never read: its host could not take a vote, and a
// fleet of such nodes, each with a record at the cap, would otherwise be
// decoded at every decision. So is a record with no Node, and one the
// record source counted and did not hold (Input.Unheld).
func TestRecordsOfNodesThatCannotVoteAreNotRead(t *testing.T) {
	f := standardFleet(k3s())
	f.hosts = append(f.hosts, &gHost{name: "rogue", eligible: no(), pinned: no(), raw: `{"v":1,"node":"rogue",` + strings.Repeat(" ", 4000) + `"garbage"`})
	in := f.input(t, settled(f, 2*time.Hour))
	if _, ok := in.Entries["rogue"]; !ok {
		t.Fatal("the fleet wrote no record for rogue: the test would show nothing")
	}
	in.Entries["no-node"] = `{"v":1,"node":"no-node"}`
	in.Unheld = map[string]int{"held-back": 200_000}
	st := decide.Decide(in)
	for _, h := range st.Hosts {
		if h.Name == "rogue" || h.Name == "no-node" || h.Name == "held-back" {
			t.Fatalf("%s is a host of the status (%s, %s), want it left out", h.Name, h.Role, h.Verdict)
		}
	}
	want := len(in.Entries) + 1
	if r := st.Records; r.Count != want || r.Ignored != 3 || r.Largest != "held-back" || r.LargestBytes != 200_000 {
		t.Fatalf("records %+v, want %d counted, 3 ignored, the largest held-back's 200000 bytes", r, want)
	}
	wantVerdict(t, st, "alpha", status.Fit)

	// Marked eligible, the same node's record is read, and is unreadable.
	f.host("rogue").eligible = yes()
	st = decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "rogue", status.Unknown)
	if st.Records.Ignored != 0 {
		t.Fatalf("records %+v, want none ignored", st.Records)
	}
}
