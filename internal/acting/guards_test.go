package acting

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// guardOf is the admit step's guard code of a fresh plan on w.
func guardOf(t *testing.T, w World, code GuardCode) Guard {
	t.Helper()
	p := Draft(w, "guided")
	if p == nil {
		t.Fatal("no plan")
	}
	for _, g := range p.Steps[0].Guards {
		if g.Code == code {
			return g
		}
	}
	t.Fatalf("admit has no guard %s", code)
	return Guard{}
}

// Each limit of the admit step at, just under and just over it.
func TestAdmitGuardBoundaries(t *testing.T) {
	m := newModel("a")
	base := m.world()

	for _, c := range []struct {
		since time.Duration
		ok    bool
	}{{SwapCooldown - time.Second, false}, {SwapCooldown, true}, {SwapCooldown + time.Second, true}} {
		w := base
		w.LastSwapEnded = w.Now.Add(-c.since)
		if g := guardOf(t, w, GuardCooldown); g.OK != c.ok {
			t.Errorf("last swap %v ago: cooldown ok %v, want %v (%s)", c.since, g.OK, c.ok, g.Detail)
		}
	}
	cap := MaxSwapsPerDay(base.Settings)
	for _, c := range []struct {
		n  int
		ok bool
	}{{cap - 1, true}, {cap, false}, {cap + 1, false}} {
		w := base
		w.SwapsDay = c.n
		if g := guardOf(t, w, GuardSwapsPerDay); g.OK != c.ok {
			t.Errorf("%d swaps today: ok %v, want %v", c.n, g.OK, c.ok)
		}
	}
	// Members: one fewer (a voter gone) and one more (a learner) than
	// target_voters both hold the swap.
	w := base
	w.Hosts = append([]Host(nil), base.Hosts...)
	for i := range w.Hosts {
		if w.Hosts[i].Name == "b" {
			w.Hosts[i].Voter = false
		}
	}
	w.EtcdMembers = 2
	if g := guardOf(t, w, GuardMembers); g.OK || *g.Value != 2 {
		t.Errorf("2 members: %+v, want not ok", g)
	}
	w.EtcdMembers = 0 // etcd's count unknown: the Nodes' alone
	if g := guardOf(t, w, GuardMembers); g.OK || *g.Value != 2 {
		t.Errorf("2 members on the Nodes, etcd's count unknown: %+v, want not ok", g)
	}
	if g := guardOf(t, base, GuardMembers); !g.OK || *g.Value != 3 {
		t.Errorf("3 members: %+v, want ok", g)
	}
	w.Hosts = append(append([]Host(nil), base.Hosts...), Host{Name: "l", Learner: true})
	if g := guardOf(t, w, GuardMembers); g.OK || *g.Value != 4 {
		t.Errorf("4 members: %+v, want not ok", g)
	}
	if g := guardOf(t, w, GuardLearners); g.OK {
		t.Errorf("a learner: %+v, want not ok", g)
	}
	// A learner no Node shows (k3s labels a learner's Node only once it
	// is promoted): etcd's voters know 4 members, the Nodes show 3.
	w = base
	w.EtcdMembers = 4
	if g := guardOf(t, w, GuardLearners); g.OK || *g.Value != 1 {
		t.Errorf("a learner on no Node: %+v, want not ok, 1", g)
	}
	if g := guardOf(t, w, GuardMembers); g.OK || *g.Value != 4 {
		t.Errorf("4 members as etcd knows them: %+v, want not ok", g)
	}
	// A voter not alive holds it: etcd 3.6.5 would refuse the add.
	w.Hosts = append([]Host(nil), base.Hosts...)
	w.Hosts[1].Alive = false
	if g := guardOf(t, w, GuardVotersAlive); g.OK {
		t.Errorf("a dead voter: %+v, want not ok", g)
	}
	// The first server cannot leave: no --server to rejoin by.
	w = base
	w.Out = "a"
	if g := guardOf(t, w, GuardJoined); g.OK {
		t.Errorf("the --cluster-init server leaving: %+v, want not ok", g)
	}
	// An unnamed etcd Node (k3s's leader would index past an unstarted
	// learner's client URLs).
	w.Out = "x"
	w.Hosts = append([]Host(nil), base.Hosts...)
	w.Hosts[1].NodeNamed = false
	if g := guardOf(t, w, GuardNodeNames); g.OK {
		t.Errorf("an unnamed etcd Node: %+v, want not ok", g)
	}
}

// The tolerance guards: with two unfit voters of three, adding first keeps
// the optimistic tolerance at 1 at every step; were every voter unfit but
// one, the optimistic tolerance still holds and the floor is 0; a fit
// standby never lowers either.
func TestToleranceAtEveryStep(t *testing.T) {
	m := newModel("a")
	w := m.world()
	p := Draft(w, "guided")
	for _, st := range p.Steps {
		for _, g := range st.Guards {
			if (g.Code == GuardToleranceOpt || g.Code == GuardToleranceFloor) && !g.OK {
				t.Errorf("%s: %s %v < %v", st.Name, g.Code, *g.Value, *g.Limit)
			}
		}
	}
	// Remove first would leave two voters, one unfit: optimistic 0.
	two := []*Host{{Verdict: "fit"}, {Verdict: "unfit"}}
	if got := tolerance(two, "x", true); got != 0 {
		t.Errorf("remove first: optimistic tolerance %d, want 0", got)
	}
	four := []*Host{{Verdict: "fit"}, {Verdict: "fit"}, {Verdict: "fit"}, {Verdict: "unfit"}}
	if got := tolerance(four, "x", true); got != 1 {
		t.Errorf("add first: optimistic tolerance %d, want 1", got)
	}
}

// A host unfit only by its links to the leaving voter is fit for the fleet
// the swap makes, as the decision judges a candidate: the standby admitted,
// the standby held as a voter before prewrite, the tolerance, and the
// voter leadership goes to. Unfit by one more link, or by anything else,
// or unknown, it is not.
func TestUnfitOnlyByTheLeavingVotersLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Host
		want bool
	}{
		{"fit", Host{Verdict: "fit"}, true},
		{"unfit by x alone", Host{Verdict: "unfit", LinksOnly: []string{"x"}}, true},
		{"unfit by x and y", Host{Verdict: "unfit", LinksOnly: []string{"x", "y"}}, false},
		{"unfit by y", Host{Verdict: "unfit", LinksOnly: []string{"y"}}, false},
		{"unfit by more than links", Host{Verdict: "unfit"}, false},
		{"unknown", Host{Verdict: "unknown", LinksOnly: []string{"x"}}, false},
	} {
		if got := tc.h.fitBut("x"); got != tc.want {
			t.Errorf("%s: fit once x has left %v, want %v", tc.name, got, tc.want)
		}
	}
	// Three voters, x unfit and y unfit only by its link to x: the
	// tolerance counting the unfit as lost is 0 (x lost), not below it.
	vs := []*Host{{Name: "w", Verdict: "fit"}, {Name: "y", Verdict: "unfit", LinksOnly: []string{"x"}}, {Name: "x", Verdict: "unfit"}}
	if got := tolerance(vs, "x", false); got != 0 {
		t.Errorf("tolerance %d, want 0", got)
	}
	vs = append(vs, &Host{Name: "s", Verdict: "unfit", LinksOnly: []string{"x"}})
	if got := tolerance(vs, "x", false); got != 0 {
		t.Errorf("with s, tolerance %d, want 0 (4 voters, quorum 3, x lost)", got)
	}
	if got := tolerance(vs[:2:2], "x", false); got != 0 {
		t.Errorf("w and y: tolerance %d, want 0 (quorum 2 of 2)", got)
	}
	if got := tolerance([]*Host{vs[0], vs[1], vs[3]}, "x", false); got != 1 {
		t.Errorf("w, y, s after x left: tolerance %d, want 1", got)
	}
	// The standby slow only to x is admitted; slow to y too, it is not.
	m := newModel("a")
	w := m.world()
	sh := w.host(w.In)
	sh.Verdict, sh.LinksOnly = "unfit", []string{w.Out}
	if g := guardOf(t, w, GuardStandbyFit); !g.OK {
		t.Errorf("a standby slow only to the leaving voter: %+v, want ok", g)
	}
	sh.LinksOnly = []string{w.Out, "other"}
	if g := guardOf(t, w, GuardStandbyFit); g.OK {
		t.Errorf("a standby slow to a voter that stays: %+v, want not ok", g)
	}
}

func TestJournalReadsBack(t *testing.T) {
	m := newModel("x")
	run(t, m, -1, killNone, false)
	b, err := m.journal.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	j, err := UnmarshalJournal(b)
	if err != nil {
		t.Fatal(err)
	}
	if j.PlanID != m.journal.PlanID || len(j.History) != len(m.journal.History) {
		t.Fatal("the journal did not read back")
	}
	if len(b) > MaxJournalBytes/8 {
		t.Errorf("a whole swap's journal is %d bytes, an eighth of the %d read", len(b), MaxJournalBytes)
	}
	for _, bad := range []string{
		`{"schema":"other"}`,
		string(b[:len(b)-1]) + `,"extra":1}`,
		string(b) + "{}",
	} {
		if _, err := UnmarshalJournal([]byte(bad)); err == nil {
			t.Errorf("read %.60q...", bad)
		}
	}
	if _, err := UnmarshalJournal(make([]byte, MaxJournalBytes+1)); err == nil {
		t.Error("read a journal over the bound")
	}
}

// TestTotalDeadlineAtDefaults holds the longest swap docs/acting.md states
// ("Limits"): the sum of every step's deadline.
func TestTotalDeadlineAtDefaults(t *testing.T) {
	s := settings.Defaults()
	doc, err := os.ReadFile("../../docs/acting.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`the sum of the deadlines: (\d+) min (\d+) s at the defaults`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/acting.md states no longest swap (\"the sum of the deadlines: N min M s at the defaults\")")
	}
	mins, _ := strconv.Atoi(string(m[1]))
	secs, _ := strconv.Atoi(string(m[2]))
	want := time.Duration(mins)*time.Minute + time.Duration(secs)*time.Second
	if got := TotalDeadline(s); got != want {
		t.Errorf("TotalDeadline(defaults) = %v, docs/acting.md says %v", got, want)
	}
	var sum time.Duration
	for _, n := range Steps {
		sum += time.Duration(deadline(s, n).Seconds) * time.Second
	}
	if sum != want {
		t.Errorf("the steps' deadlines sum to %v", sum)
	}
}
