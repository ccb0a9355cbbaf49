package decide_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// votersFleet is n voters (alpha, bravo, ...) and two standbys, all
// eligible, none pinned, with target_voters n.
func votersFleet(t *testing.T, n int) *gFleet {
	t.Helper()
	s := settings.Defaults()
	s.TargetVoters, s.MaxServers = n, n+2
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	names := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"}
	f := &gFleet{s: s, now: baseNow, slow: map[[2]string]float64{}}
	for _, name := range names[:n] {
		f.hosts = append(f.hosts, &gHost{name: name, voter: true, eligible: yes(), pinned: no()})
	}
	f.hosts = append(f.hosts, &gHost{name: "standby-1", eligible: yes(), pinned: no()}, &gHost{name: "standby-2", eligible: yes(), pinned: no()})
	return f
}

// slowHost makes every path of host slow, as a host on a poor link is.
func (f *gFleet) slowHost(host string) {
	for _, h := range f.hosts {
		if h.name != host {
			f.slow[pairOf(host, h.name)] = 0.4
		}
	}
}

func TestAttributionNamesOneSlowVoter(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := votersFleet(t, n)
			f.slowHost("bravo")
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			wantSwap(t, st, "bravo", "standby-1")
			r := decisionReason(t, st, decide.StepAttribution, "")
			if !r.OK || *r.Value != 1 || *r.Limit != float64((n-1)/2) || !strings.Contains(r.Detail, "{bravo}, with ") {
				t.Fatalf("attribution: %+v", r)
			}
		})
	}
}

// Two slow voters of five: the smallest set touching every slow link is the
// two, a minority (the limit, 2 of 5), and the one on the most slow links is
// named (alpha: 4, bravo's link to alpha among them); every standby is slow
// to the other, which would remain, so none is fit. Three slow voters are
// just over the limit.
func TestAttributionMinorityBoundary(t *testing.T) {
	f := votersFleet(t, 5)
	f.slowHost("alpha")
	f.slowHost("bravo")
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNone(t, st, decide.StepCandidate)
	if r := decisionReason(t, st, decide.StepReplace, "alpha"); *r.Value != 4 {
		t.Fatalf("replace: %+v", r)
	}
	if r := decisionReason(t, st, decide.StepAttribution, ""); !r.OK || *r.Value != 2 || !strings.Contains(r.Detail, "{alpha, bravo}") {
		t.Fatalf("attribution: %+v", r)
	}
	f.slowHost("charlie")
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNone(t, st, decide.StepAttribution)
	if r := decisionReason(t, st, decide.StepAttribution, ""); *r.Value != 3 || !strings.Contains(r.Detail, "not a minority") {
		t.Fatalf("attribution: %+v", r)
	}
}

// Every link slow, as a stall of the whole machine makes it: every voter is
// unfit, and no host is named.
func TestEveryLinkSlowNamesNoHost(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := votersFleet(t, n)
			for _, h := range f.hosts {
				h.connect = 0.3 // every connect the host makes
			}
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			for _, h := range st.Hosts {
				wantVerdict(t, st, h.Name, decide.Unfit)
			}
			wantNone(t, st, decide.StepAttribution)
			r := decisionReason(t, st, decide.StepAttribution, "")
			if *r.Value != float64(n-1) || !strings.Contains(r.Detail, "alpha-bravo") || !strings.Contains(r.Detail, "no host explains them") {
				t.Fatalf("attribution: %+v", r)
			}
			for _, r := range st.Decision.Reasons {
				if r.Signal == decide.StepReplace || r.Signal == decide.StepCandidate {
					t.Fatalf("a voter was named: %+v", r)
				}
			}
		})
	}
}

// The residue of a stall of the whole machine that lasted between one and
// two periods: one voter caught two slow samples (over the tail), the others
// one each (forgiven). The link between the others is then not measured fit
// from both ends together, and no host is named.
func TestStallResidueNamesNoHost(t *testing.T) {
	f := standardFleet(settings.Defaults())
	stall := func(k int) func(i, n int) float64 {
		return func(i, n int) float64 {
			if i >= n-k-3 && i < n-3 {
				return 0.3
			}
			return 0
		}
	}
	f.host("alpha").stall = stall(2)
	f.host("bravo").stall = stall(1)
	f.host("charlie").stall = stall(1)
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "alpha", decide.Unfit)
	wantNone(t, st, decide.StepAttribution)
	if r := decisionReason(t, st, decide.StepAttribution, ""); !strings.Contains(r.Detail, "measured fit from both ends together") {
		t.Fatalf("attribution: %+v", r)
	}
	// A real slow voter beside the same one forgiven sample on one end of
	// the link outside it is named.
	f.host("alpha").stall = stall(50)
	f.host("charlie").stall = nil
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "alpha", "delta")
	if r := decisionReason(t, st, decide.StepAttribution, ""); !strings.Contains(r.Detail, "bravo-charlie measured fit (1 of its 200 connects") {
		t.Fatalf("attribution: %+v", r)
	}
}

// A standby slow to every voter beside sound voters: nothing is attributed
// to a voter; a voter unfit by its disk is replaced by the other standby.
func TestSlowStandbySoundVoters(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.host("delta").connect = 0.4
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "delta", decide.Unfit)
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		wantVerdict(t, st, n, decide.Fit)
	}
	wantNone(t, st, decide.StepReplace)
	if r := decisionReason(t, st, decide.StepAttribution, ""); !r.OK || !strings.Contains(r.Detail, "no link between voters is slow") {
		t.Fatalf("attribution: %+v", r)
	}
	f.host("alpha").slowWAL = true
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "alpha", "echo")
}

// A pinned voter on the most slow links: nothing is swapped, even with
// another voter unfit by its memory.
func TestPinnedOnMostSlowLinks(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.slowHost("bravo")
	f.host("bravo").pinned = yes()
	f.host("charlie").lowMem = true
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNone(t, st, decide.StepPinned)
	if r := decisionReason(t, st, decide.StepReplace, "bravo"); *r.Value != 2 {
		t.Fatalf("replace: %+v", r)
	}
	for _, r := range st.Decision.Reasons {
		if r.Signal == decide.StepCandidate {
			t.Fatalf("a candidate was judged for a pinned voter: %+v", r)
		}
	}
}

// A pinned voter unfit by its disk beside an unpinned voter unfit by its
// memory: the pinned one is furthest over its limits and is passed over; the
// other is replaced.
func TestPinnedDiskBesideMemory(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.host("alpha").slowWAL = true
	f.host("alpha").pinned = yes()
	f.host("bravo").lowMem = true
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantSwap(t, st, "bravo", "delta")
	if r := decisionReason(t, st, decide.StepPinned, "alpha"); !r.OK || !strings.Contains(r.Detail, "wal_fsync") {
		t.Fatalf("pinned: %+v", r)
	}
	if r := decisionReason(t, st, decide.StepReplace, "bravo"); !strings.Contains(r.Detail, "next unfit unpinned voter after alpha") {
		t.Fatalf("replace: %+v", r)
	}
}

// A disk breach on most recording hosts is the fleet's, not a host's: at,
// just under and just over more than half.
func TestWholeFleetDiskBreach(t *testing.T) {
	for _, c := range []struct {
		hosts, slow int
		shared      bool
	}{{5, 2, false}, {5, 3, true}, {4, 2, false}, {4, 3, true}} {
		t.Run(fmt.Sprintf("%d of %d", c.slow, c.hosts), func(t *testing.T) {
			f := standardFleet(settings.Defaults())
			f.hosts = f.hosts[:c.hosts]
			for _, h := range f.hosts[:c.slow] {
				h.slowWAL = true
			}
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			for _, h := range f.hosts[:c.slow] {
				wantVerdict(t, st, h.name, decide.Unfit)
			}
			if !c.shared {
				r := decisionReason(t, st, decide.StepFleetWide, "disk")
				if !r.OK || *r.Value != float64(c.slow) || *r.Limit != float64(c.hosts)/2 {
					t.Fatalf("fleet_wide: %+v", r)
				}
				return
			}
			wantNone(t, st, decide.StepFleetWide)
			r := decisionReason(t, st, decide.StepFleetWide, "disk")
			if *r.Value != float64(c.slow) || !strings.Contains(r.Detail, fmt.Sprintf("%d of the %d recording hosts", c.slow, c.hosts)) {
				t.Fatalf("fleet_wide: %+v", r)
			}
			for _, r := range st.Decision.Reasons {
				if r.Signal == decide.StepReplace {
					t.Fatalf("a voter was named: %+v", r)
				}
			}
		})
	}
}

// A swap named at fewer than SteadyDecisions consecutive decisions is never
// published; one that persists is published at decision SteadyDecisions. A
// published swap gone at the next decision is a flap; verdict changes are
// counted.
func TestHysteresis(t *testing.T) {
	slow := standardFleet(settings.Defaults())
	slow.host("alpha").slowWAL = true
	fit := standardFleet(settings.Defaults())
	prev := settled(slow, 2*time.Hour)
	step := func(f *gFleet) decide.Status {
		st := decide.Decide(f.input(t, prev))
		prev = &st
		return st
	}
	// Named, gone, named, named, gone: never SteadyDecisions in a row.
	for i, f := range []*gFleet{slow, fit, slow, slow, fit, slow} {
		st := step(f)
		if st.Decision.Action != decide.ActionNone {
			t.Fatalf("decision %d published %+v", i, st.Decision)
		}
		if f == slow {
			r := decisionReason(t, st, decide.StepSteady, "alpha")
			if r.OK || *r.Value != float64(st.Memory.NamedDecisions) || st.Memory.Named != "alpha" {
				t.Fatalf("decision %d: steady %+v, memory %+v", i, r, st.Memory)
			}
		} else if st.Memory.Named != "" || st.Memory.NamedDecisions != 0 {
			t.Fatalf("decision %d: memory %+v", i, st.Memory)
		}
	}
	if prev.Memory.Flaps != 0 || prev.Memory.VerdictChanges != 4 {
		t.Fatalf("memory %+v, want 0 flaps and 4 verdict changes (alpha: unfit, fit, unfit, fit, unfit)", prev.Memory)
	}
	// Held until the SteadyDecisions-th consecutive decision, then published
	// and held at the cap, so the document does not change.
	prev = settled(slow, 2*time.Hour)
	for i := 1; i <= decide.SteadyDecisions+1; i++ {
		st := step(slow)
		want := min(i, decide.SteadyDecisions)
		if st.Memory.NamedDecisions != want || (st.Decision.Action == decide.ActionSwap) != (i >= decide.SteadyDecisions) {
			t.Fatalf("decision %d: %s, memory %+v", i, st.Decision.Action, st.Memory)
		}
	}
	wantSwap(t, *prev, "alpha", "delta")
	st := step(fit)
	if st.Memory.Flaps != 1 || st.Memory.VerdictChanges != 1 {
		t.Fatalf("a published swap gone: memory %+v, want 1 flap, 1 verdict change", st.Memory)
	}
	// A swap gone because the voter set changed is no flap.
	prev = settled(slow, 2*time.Hour)
	for range decide.SteadyDecisions {
		step(slow)
	}
	prev.Memory.Voters = []string{"alpha", "bravo", "zulu"}
	if st := step(slow); st.Memory.Flaps != 0 || st.Decision.Action != decide.ActionNone {
		t.Fatalf("voter set changed: memory %+v", st.Memory)
	}
}
