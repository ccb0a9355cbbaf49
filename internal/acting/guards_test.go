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
	if g := guardOf(t, w, GuardMembers); g.OK || *g.Value != 2 {
		t.Errorf("2 members: %+v, want not ok", g)
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
	if got := tolerance(two, true); got != 0 {
		t.Errorf("remove first: optimistic tolerance %d, want 0", got)
	}
	four := []*Host{{Verdict: "fit"}, {Verdict: "fit"}, {Verdict: "fit"}, {Verdict: "unfit"}}
	if got := tolerance(four, true); got != 1 {
		t.Errorf("add first: optimistic tolerance %d, want 1", got)
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
