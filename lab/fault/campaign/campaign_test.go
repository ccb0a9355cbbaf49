package campaign

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// campaignSettings are the campaign's settings as the product reads them.
func campaignSettings(t *testing.T, voters int) settings.Settings {
	t.Helper()
	s, err := settings.Parse([]byte(SettingsFor(voters)), settings.Defaults())
	if err == nil {
		err = s.Validate()
	}
	if err != nil {
		t.Fatalf("the campaign's settings for %d voters: %v", voters, err)
	}
	return s
}

// The probe's reading timeout at the campaign's settings: half the period.
const timeout = time.Second

func testFleet(voters int) Fleet {
	f := Fleet{Pinned: "voter-1"}
	for i := range voters {
		f.Voters = append(f.Voters, "voter-"+string(rune('1'+i)))
	}
	f.Standbys = []string{"standby-1", "standby-2"}
	return f
}

func TestSettingsAreLegal(t *testing.T) {
	for _, v := range []int{3, 5} {
		s := campaignSettings(t, v)
		b := BoundsOf(s)
		// The p90 of a window of 10 forgives one slow sample: the second
		// turns the tail.
		if b.Need != 2 || b.Forgiven != 1 {
			t.Errorf("%d voters: need %d, forgiven %d; want 2 and 1", v, b.Need, b.Forgiven)
		}
		if b.Publish > 5 {
			t.Errorf("%d voters: publication bound %.1f periods, over the 5 the campaign allows", v, b.Publish)
		}
		if window := time.Duration(s.Window) * s.SamplePeriod; window >= 30*time.Second {
			t.Errorf("a window spans %v: a fault would not roll out well under a minute", window)
		}
	}
}

func TestScheduleInjectsEveryKindFirst(t *testing.T) {
	for _, voters := range []int{3, 5} {
		s := campaignSettings(t, voters)
		r := RangesOf(s, timeout)
		f := testFleet(voters)
		n := len(Kinds) + 1 // voter-delay twice: follower and leader
		specs := Schedule(7, n+20, f, r)
		if len(specs) != n+20 {
			t.Fatalf("%d voters: %d specs, want %d", voters, len(specs), n+20)
		}
		var first []Kind
		leaders := 0
		for _, sp := range specs[:n] {
			first = append(first, sp.Kind)
			if sp.Leader {
				leaders++
			}
		}
		for _, k := range Kinds {
			if !slices.Contains(first, k) {
				t.Errorf("%d voters: the first round has no %s: %v", voters, k, first)
			}
		}
		if leaders != 1 {
			t.Errorf("%d voters: the first round makes %d faults on etcd's leader, want 1", voters, leaders)
		}
		for i, sp := range specs {
			checkSpec(t, i, sp, f, r)
		}
		if again := Schedule(7, n+20, f, r); !slices.EqualFunc(again, specs, func(a, b Spec) bool { return a.String() == b.String() && a.Gap == b.Gap }) {
			t.Errorf("%d voters: the same seed drew another schedule", voters)
		}
		if other := Schedule(8, n+20, f, r); slices.EqualFunc(other, specs, func(a, b Spec) bool { return a.String() == b.String() }) {
			t.Errorf("%d voters: seeds 7 and 8 drew the same schedule", voters)
		}
	}
}

func TestScheduleOnly(t *testing.T) {
	s := campaignSettings(t, 5)
	r := RangesOf(s, timeout)
	f := testFleet(5)
	specs, err := ScheduleOnly(11, 12, f, r, VoterDelay, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 12 {
		t.Fatalf("%d specs, want 12", len(specs))
	}
	for i, sp := range specs {
		if sp.Kind != VoterDelay || !sp.Leader {
			t.Errorf("spec %d is %s, want a voter-delay of etcd's leader", i, sp)
		}
		checkSpec(t, i, sp, f, r)
	}
	if specs, err = ScheduleOnly(11, 3, f, r, VoterPause, false); err != nil || len(specs) != 3 || specs[2].Kind != VoterPause || specs[2].Leader {
		t.Errorf("voter-pause alone: %v, %v", specs, err)
	}
	for _, bad := range []struct {
		kind   Kind
		leader bool
	}{{"voter-slow", false}, {VoterPause, true}} {
		if _, err := ScheduleOnly(11, 3, f, r, bad.kind, bad.leader); err == nil {
			t.Errorf("%s (leader %v) was drawn, want an error", bad.kind, bad.leader)
		}
	}
	// Two-voters needs two unpinned voters: a fleet of two voters cannot
	// hold it, and the draw says so rather than spinning.
	if _, err := ScheduleOnly(11, 3, testFleet(2), r, TwoVoters, false); err == nil {
		t.Error("two-voters on two voters was drawn, want an error")
	}
}

// checkSpec holds a drawn fault to the ranges docs/campaign.md derives.
func checkSpec(t *testing.T, i int, sp Spec, f Fleet, r Ranges) {
	t.Helper()
	where := func(hs ...string) {
		for _, h := range hs {
			if !slices.Contains(f.Voters, h) && !slices.Contains(f.Standbys, h) {
				t.Errorf("spec %d (%s): unknown host %q", i, sp, h)
			}
		}
	}
	where(sp.Hosts...)
	if sp.Gap < 0 || sp.Gap.D() > 2*r.Period {
		t.Errorf("spec %d (%s): gap %v", i, sp, sp.Gap)
	}
	switch sp.Kind {
	case VoterDelay, VoterLoss, VoterPartition, VoterDisk, VoterCPU, VoterPause, Flap, Blip:
		if sp.Host == f.Pinned || !slices.Contains(f.Voters, sp.Host) {
			t.Errorf("spec %d (%s): on %q, want an unpinned voter", i, sp, sp.Host)
		}
	case StandbyDisk, StandbyDelay:
		if !slices.Contains(f.Standbys, sp.Host) {
			t.Errorf("spec %d (%s): on %q, want a standby", i, sp, sp.Host)
		}
	case LinkDelay, TwoVoters:
		if len(sp.Hosts) != 2 || sp.Hosts[0] == sp.Hosts[1] {
			t.Errorf("spec %d (%s): hosts %v, want two voters", i, sp, sp.Hosts)
		}
	}
	if d := sp.Severity.Delay.D(); d != 0 {
		rttLimit := 500 * time.Millisecond // k3s's election timeout / 10
		if 2*d <= rttLimit || 2*d >= r.Timeout {
			t.Errorf("spec %d (%s): a round trip of %v, want past the limit %v and inside the timeout %v", i, sp, 2*d, rttLimit, r.Timeout)
		}
	}
	switch sp.Kind {
	case VoterDisk, StandbyDisk:
		if d := sp.Severity.FsyncDelay.D(); d <= 10*time.Millisecond {
			t.Errorf("spec %d (%s): fsync delay %v, want past etcd's 10 ms", i, sp, d)
		}
	case Blip:
		// At most the forgiven count of slow samples per probe.
		if sp.Length.D()+2*sp.Severity.Delay.D() >= time.Duration(r.Bounds.Forgiven)*r.Period {
			t.Errorf("spec %d (%s): a blip of %v with %v each way can give a probe two slow samples", i, sp, sp.Length, sp.Severity.Delay)
		}
	case Flap:
		var sum time.Duration
		for _, d := range sp.Severity.Toggles {
			if d.D() != r.Period && d.D() != 2*r.Period {
				t.Errorf("spec %d (%s): a phase of %v, want one or two periods", i, sp, d)
			}
			sum += d.D()
		}
		if sum != sp.Length.D() {
			t.Errorf("spec %d (%s): phases sum to %v, length %v", i, sp, sum, sp.Length)
		}
	case VoterPause:
		if sp.Length.D() <= 3*r.Period {
			t.Errorf("spec %d (%s): paused %v, not past the freshness limit of 3 periods", i, sp, sp.Length)
		}
	case VoterLoss:
		if sp.Severity.Loss < r.MinLoss || sp.Severity.Loss > LossMax {
			t.Errorf("spec %d (%s): loss %v outside [%v, %v]", i, sp, sp.Severity.Loss, r.MinLoss, LossMax)
		}
		if b := BoundOf(sp, r, len(f.Voters)); sp.Length.D() <= time.Duration(b*float64(r.Period)) {
			t.Errorf("spec %d (%s): lasts %v, not past its bound of %.0f periods", i, sp, sp.Length, b)
		}
	case VoterCPU:
		if sp.Severity.CPU < r.MinCPU || sp.Severity.CPU > r.MaxCPU {
			t.Errorf("spec %d (%s): %v of a core outside [%v, %v]", i, sp, sp.Severity.CPU, r.MinCPU, r.MaxCPU)
		}
		if b := BoundOf(sp, r, len(f.Voters)); sp.Length.D() <= time.Duration(b*float64(r.Period)) {
			t.Errorf("spec %d (%s): lasts %v, not past its bound of %.1f periods", i, sp, sp.Length, b)
		}
	default:
		if sp.Truth(f).SwapWorthy() && sp.Length.D() <= time.Duration(r.Bounds.Publish*float64(r.Period)) {
			t.Errorf("spec %d (%s): lasts %v, not past its publication bound", i, sp, sp.Length)
		}
	}
}

func (s Spec) Truth(f Fleet) Truth { return TruthOf(s, f) }

func TestTruth(t *testing.T) {
	f3, f5 := testFleet(3), testFleet(5)
	cases := []struct {
		spec Spec
		f    Fleet
		want Truth
	}{
		{Spec{Kind: VoterDelay, Host: "voter-2"}, f3, Truth{Action: "swap", Out: "voter-2"}},
		{Spec{Kind: LinkDelay, Hosts: []string{"voter-1", "voter-3"}}, f3, Truth{Action: "swap", OutAny: []string{"voter-3"}}},
		{Spec{Kind: LinkDelay, Hosts: []string{"voter-2", "voter-3"}}, f3, Truth{Action: "swap", OutAny: []string{"voter-2", "voter-3"}}},
		{Spec{Kind: TwoVoters, Hosts: []string{"voter-2", "voter-3"}}, f3, Truth{Action: "none"}},
		{Spec{Kind: TwoVoters, Hosts: []string{"voter-2", "voter-4"}}, f5, Truth{Action: "swap", OutAny: []string{"voter-2", "voter-4"}}},
		{Spec{Kind: StandbyDisk, Host: "standby-2"}, f3, Truth{Action: "none", Unfit: []string{"standby-2"}, Signal: "fdatasync"}},
		{Spec{Kind: VoterDisk, Host: "voter-3"}, f3, Truth{Action: "swap", Out: "voter-3", Unfit: []string{"voter-3"}, Signal: "wal_fsync"}},
		{Spec{Kind: FleetDelay}, f5, Truth{Action: "none"}},
		{Spec{Kind: Blip, Host: "voter-2"}, f3, Truth{Action: "none"}},
	}
	for _, c := range cases {
		got := TruthOf(c.spec, c.f)
		if got.Why == "" {
			t.Errorf("%s: no derivation", c.spec.Kind)
		}
		got.Why = ""
		if g, w := mustJSON(t, got), mustJSON(t, c.want); g != w {
			t.Errorf("%s on %v with %d voters: truth %s, want %s", c.spec.Kind, c.spec.Hosts, len(c.f.Voters), g, w)
		}
	}
	for _, k := range Kinds {
		if TruthOf(Spec{Kind: k, Host: "voter-2", Hosts: []string{"voter-2", "voter-3"}}, f3).Why == "unknown kind" {
			t.Errorf("%s has no truth", k)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFlapBound(t *testing.T) {
	r := RangesOf(campaignSettings(t, 3), timeout)
	P := r.Period
	// On 1, off 2, on 1, off 1: the second slow sample comes in the second
	// on-phase, which ends 4 periods in; the rest of the bound (3) counts
	// from there.
	sp := Spec{Kind: Flap, Severity: Severity{Toggles: []Duration{Duration(P), Duration(2 * P), Duration(P), Duration(P)}}}
	if got, want := BoundOf(sp, r, 3), 4+r.Bounds.Publish-float64(r.Bounds.Need); got != want {
		t.Errorf("flap bound %.1f, want %.1f", got, want)
	}
	// On 2 at once: like a steady delay.
	sp.Severity.Toggles = []Duration{Duration(2 * P), Duration(P)}
	if got := BoundOf(sp, r, 3); got != r.Bounds.Publish {
		t.Errorf("flap bound %.1f, want %.1f", got, r.Bounds.Publish)
	}
}

// at is a time s seconds after a fixed start.
func at(s float64) time.Time {
	return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

func dec(s float64, action, out string, hosts ...string) Decision {
	d := Decision{Time: at(s), Action: action, Hosts: map[string]string{}}
	if action == "swap" {
		d.Out, d.In = out, "standby-1"
	}
	for _, h := range hosts {
		name, v, _ := strings.Cut(h, "=")
		d.Hosts[name] = v
	}
	return d
}

func TestScore(t *testing.T) {
	const period = 2 * time.Second
	standbys := []string{"standby-1", "standby-2"}
	swapV2 := Truth{Action: "swap", Out: "voter-2"}
	none := Truth{Action: "none"}
	fault := func(kind Kind, start, end, rec float64, truth Truth) Fault {
		return Fault{Spec: Spec{Kind: kind, Host: "voter-2"}, Start: at(start), End: at(end), Recovered: at(rec), Truth: truth, Bound: 5}
	}
	cases := []struct {
		name      string
		faults    []Fault
		decisions []Decision
		want      []string // outcome per fault
		totals    Totals
	}{
		{
			name:      "caught at the bound, and held until it ended",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(99, "none", ""), dec(105, "none", ""), dec(110, "swap", "voter-2"), dec(131, "swap", "voter-2"), dec(150, "none", ""), dec(170, "none", "")},
			want:      []string{"caught"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Caught: 1, CleanDecisions: 2, Decisions: 6},
		},
		{
			name:      "just over the bound: late, counted missed",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(110.01, "swap", "voter-2")},
			want:      []string{"late"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, Decisions: 1},
		},
		{
			name:      "never published",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(110, "none", "")},
			want:      []string{"missed"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, Decisions: 1},
		},
		{
			name:      "the wrong voter",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(104, "swap", "voter-3"), dec(108, "swap", "voter-2")},
			want:      []string{"wrong-swap"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Caught: 1, WrongSwaps: 1, Flaps: 1, Decisions: 2},
		},
		{
			name:      "withdrawn while the fault lasts: a flap",
			faults:    []Fault{fault(Flap, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(108, "swap", "voter-2"), dec(112, "none", ""), dec(116, "swap", "voter-2")},
			want:      []string{"flap"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Caught: 1, Flaps: 1, Decisions: 3},
		},
		{
			name:      "withdrawn after it ended, as the window rolls: no flap",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{dec(108, "swap", "voter-2"), dec(140, "none", "")},
			want:      []string{"caught"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Caught: 1, Decisions: 2},
		},
		{
			name:      "a swap on a none fault, and one between faults",
			faults:    []Fault{fault(VoterPause, 100, 110, 130, none)},
			decisions: []Decision{dec(50, "swap", "voter-3"), dec(120, "swap", "voter-2"), dec(125, "swap", "voter-2")},
			want:      []string{"wrong-swap"},
			totals:    Totals{Faults: 1, WrongSwaps: 3, CleanDecisions: 1, Decisions: 3},
		},
		{
			name:      "a swap to a voter, not a standby, is wrong",
			faults:    []Fault{fault(VoterDelay, 100, 130, 160, swapV2)},
			decisions: []Decision{{Time: at(108), Action: "swap", Out: "voter-2", In: "voter-3"}},
			want:      []string{"wrong-swap"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, WrongSwaps: 1, Decisions: 1},
		},
		{
			name: "withdrawn while etcd holds a voter without a leader: the gates' due, no flap",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(109), To: at(140)}}}
				return f
			}()},
			decisions: []Decision{dec(108, "swap", "voter-2"), dec(110, "none", ""), dec(125, "swap", "voter-2")},
			want:      []string{"caught"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Caught: 1, Decisions: 3},
		},
		{
			name: "never published, etcd held a voter before the bound: gated",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(109.9), To: at(150)}}}
				return f
			}()},
			decisions: []Decision{dec(108, "none", "")},
			want:      []string{"gated"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Gated: 1, Decisions: 1},
		},
		{
			name: "held before the bound, published within the bound of the gates' end: gated",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(109.9), To: at(112)}, {From: at(114), To: at(120)}}}
				return f
			}()},
			decisions: []Decision{dec(108, "none", ""), dec(130, "swap", "voter-2")},
			want:      []string{"gated"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Gated: 1, Decisions: 2},
		},
		{
			name: "published just past the bound of the gates' end: late",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(109.9), To: at(120)}}}
				return f
			}()},
			decisions: []Decision{dec(108, "none", ""), dec(130.01, "swap", "voter-2")},
			want:      []string{"late"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, Decisions: 2},
		},
		{
			name: "published inside the held span, past the bound: gated",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(109.9), To: at(125)}}}
				return f
			}()},
			decisions: []Decision{dec(124.9, "swap", "voter-2")},
			want:      []string{"gated"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Gated: 1, Decisions: 1},
		},
		{
			name: "held only after the bound, published late: late",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(110.1), To: at(120)}}}
				return f
			}()},
			decisions: []Decision{dec(121, "swap", "voter-2")},
			want:      []string{"late"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, Decisions: 1},
		},
		{
			name: "etcd held a voter only after the bound: missed",
			faults: []Fault{func() Fault {
				f := fault(VoterLoss, 100, 130, 160, swapV2)
				f.Held = map[string][]Interval{"voter-2": {{From: at(110.1), To: at(150)}}}
				return f
			}()},
			decisions: []Decision{dec(108, "none", "")},
			want:      []string{"missed"},
			totals:    Totals{Faults: 1, SwapWorthy: 1, Missed: 1, Decisions: 1},
		},
		{
			name:   "never recovered",
			faults: []Fault{{Spec: Spec{Kind: VoterDisk}, Start: at(100), End: at(130), Truth: none}},
			want:   []string{"unrecovered"},
			totals: Totals{Faults: 1, Unrecovered: 1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, tot := Score(c.faults, c.decisions, period, standbys)
			for i, f := range got {
				if f.Outcome != c.want[i] {
					t.Errorf("fault %d: outcome %s, want %s (notes %v)", i, f.Outcome, c.want[i], f.Notes)
				}
				if f.OK != (c.want[i] == "caught" || c.want[i] == "held" || c.want[i] == "gated") {
					t.Errorf("fault %d: ok %v with outcome %s", i, f.OK, f.Outcome)
				}
			}
			tot.Kinds = nil
			if g, w := mustJSON(t, tot), mustJSON(t, c.totals); g != w {
				t.Errorf("totals %s, want %s", g, w)
			}
		})
	}
	// A host the truth calls unfit must be reported unfit by its signal.
	f := fault(StandbyDisk, 100, 130, 160, Truth{Action: "none", Unfit: []string{"standby-2"}, Signal: "fdatasync"})
	d := dec(120, "none", "")
	d.UnfitBy = map[string][]string{"standby-2": {"connect"}}
	if got, _ := Score([]Fault{f}, []Decision{d}, period, standbys); got[0].Outcome != "unseen" {
		t.Errorf("unfit by connect, not fdatasync: outcome %s, want unseen", got[0].Outcome)
	}
	d.UnfitBy["standby-2"] = []string{"fdatasync"}
	if got, _ := Score([]Fault{f}, []Decision{d}, period, standbys); got[0].Outcome != "held" {
		t.Errorf("unfit by fdatasync: outcome %s, want held", got[0].Outcome)
	}
}

// The table's row of a kind counts each swap-worthy fault by its swap's
// publication, as the totals do: a fault caught and then swapped wrongly is
// caught (and not ok), a late one missed.
func TestByKindCountsAsTheTotals(t *testing.T) {
	const period = 2 * time.Second
	swapV2 := Truth{Action: "swap", Out: "voter-2"}
	fault := func(start float64) Fault {
		return Fault{Spec: Spec{Kind: VoterDelay, Host: "voter-2"}, Start: at(start), End: at(start + 30), Recovered: at(start + 60), Truth: swapV2, Bound: 5}
	}
	faults := []Fault{fault(100), fault(200), fault(300)}
	decisions := []Decision{
		dec(104, "swap", "voter-2"), dec(106, "swap", "voter-3"), // caught, then the wrong voter
		dec(205, "swap", "voter-2"), // caught
		dec(315, "swap", "voter-2"), // late
	}
	scored, tot := Score(faults, decisions, period, []string{"standby-1"})
	rows := ByKind(scored)
	if len(rows) != 1 {
		t.Fatalf("rows %+v, want one", rows)
	}
	// A delay of etcd's leader is a row of its own, after the follower's.
	lead := append(slices.Clone(faults), Fault{Spec: Spec{Kind: VoterDelay, Host: "voter-3", Leader: true}, Start: at(400), End: at(430),
		Recovered: at(460), Truth: Truth{Action: "swap", Out: "voter-3"}, Bound: 5})
	leadScored, _ := Score(lead, append(slices.Clone(decisions), dec(404, "swap", "voter-3")), period, []string{"standby-1"})
	if two := ByKind(leadScored); len(two) != 2 || two[0].Leader || !two[1].Leader || two[1].Name() != "voter-delay (leader)" ||
		two[0].Injected != 3 || two[1].Injected != 1 || two[1].Caught != 1 {
		t.Fatalf("rows with a slow leader: %+v, want the follower's three and then the leader's one, caught", two)
	}
	r := rows[0]
	if r.Caught != tot.Caught || r.Missed != tot.Missed || r.Gated != tot.Gated || r.Caught != 2 || r.Missed != 1 || r.Failed != 2 {
		t.Errorf("row caught %d missed %d gated %d failed %d; totals caught %d missed %d gated %d; want 2 caught, 1 missed, 2 not ok (outcomes %s, %s, %s)",
			r.Caught, r.Missed, r.Gated, r.Failed, tot.Caught, tot.Missed, tot.Gated, scored[0].Outcome, scored[1].Outcome, scored[2].Outcome)
	}
}

// TestOutputs holds the board's fields (the issue names them), that
// decisions.jsonl holds every decision, and that the timeline is well-formed
// SVG.
func TestOutputs(t *testing.T) {
	s := campaignSettings(t, 3)
	r := RangesOf(s, timeout)
	specs := Schedule(3, 2, testFleet(3), r)
	res := &Result{Seed: 3, Settings: s, Fleet: testFleet(3), Ranges: r, Started: at(0), Ended: at(300)}
	for i, sp := range specs {
		res.Faults = append(res.Faults, Fault{Spec: sp, Truth: TruthOf(sp, res.Fleet), Bound: 5,
			Start: at(float64(100 * i)), End: at(float64(100*i + 20)), Recovered: at(float64(100*i + 50))})
	}
	res.decisions = []Decision{dec(5, "none", "", "voter-1=fit", "voter-2=fit"), dec(110, "swap", "voter-2", "voter-1=unfit", "voter-2=unknown"), dec(250, "none", "", "voter-1=fit")}
	res.Faults, res.Totals = Score(res.Faults, res.decisions, s.SamplePeriod, res.Fleet.Standbys)
	dir := t.TempDir()
	if err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	// The board read back scores the same, whatever its earlier score.
	again, err := Rescore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Totals, res.Totals) || len(again.Faults) != len(res.Faults) {
		t.Fatalf("rescored totals %+v, want %+v", again.Totals, res.Totals)
	}
	for i := range res.Faults {
		a, w := again.Faults[i], res.Faults[i]
		if a.Outcome != w.Outcome || a.OK != w.OK || !slices.Equal(a.Notes, w.Notes) || a.WrongSwaps != w.WrongSwaps {
			t.Fatalf("fault %d rescored %s %v %q, want %s %v %q", i, a.Outcome, a.OK, a.Notes, w.Outcome, w.OK, w.Notes)
		}
	}
	if _, err := Rescore(t.TempDir()); err == nil || !strings.Contains(err.Error(), "scoreboard.json") {
		t.Fatalf("rescore of an empty directory: %v", err)
	}
	var board map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "scoreboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &board); err != nil {
		t.Fatalf("scoreboard.json: %v", err)
	}
	for _, k := range []string{"seed", "settings", "faults", "totals"} {
		if _, ok := board[k]; !ok {
			t.Errorf("scoreboard.json has no %q", k)
		}
	}
	faults, _ := board["faults"].([]any)
	if len(faults) != 2 {
		t.Fatalf("scoreboard.json holds %d faults, want 2", len(faults))
	}
	for _, f := range faults {
		m := f.(map[string]any)
		for _, k := range []string{"kind", "host", "start", "end", "recovered", "truth", "outcome", "periods_to_publish", "ok"} {
			if _, ok := m[k]; !ok && !(k == "host" && m["kind"] == string(TwoVoters)) {
				t.Errorf("a fault has no %q: %v", k, m)
			}
		}
		if start, _ := m["start"].(string); start != "" {
			if _, err := time.Parse(time.RFC3339, start); err != nil {
				t.Errorf("start %q is not RFC 3339: %v", start, err)
			}
		}
	}
	totals, _ := board["totals"].(map[string]any)
	for _, k := range []string{"faults", "swap_worthy", "caught", "missed", "wrong_swaps", "flaps", "clean_decisions", "kinds"} {
		if _, ok := totals[k]; !ok {
			t.Errorf("totals has no %q", k)
		}
	}
	lines, err := os.ReadFile(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(lines)), "\n")
	if len(got) != len(res.decisions) {
		t.Fatalf("decisions.jsonl holds %d lines, want %d", len(got), len(res.decisions))
	}
	for _, l := range got {
		var d map[string]any
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("decisions.jsonl line %q: %v", l, err)
		}
		for _, k := range []string{"time", "action", "hosts"} {
			if _, ok := d[k]; !ok {
				t.Errorf("a decision has no %q: %s", k, l)
			}
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "timeline.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("timeline.svg is not well-formed XML: %v", err)
		}
	}
	if !strings.Contains(string(svg), "voter-2") || !strings.Contains(string(svg), "<path") {
		t.Errorf("the timeline names no host or marks no swap")
	}
}

// LossPeriods against figures worked by hand: at q = 0.51 one end's 6
// connects hold 2 failures with probability 0.900, either of two ends 0.990,
// both links of a voter among 3 0.980 (short of 0.99); at 7 periods 0.9938.
func TestLossPeriods(t *testing.T) {
	// The least loss the tail cannot forgive at a window of 10 and need 2:
	// at 0.25, q = 0.4375, one end's window holds 2 failures with
	// probability 0.97216, either end 0.99923; at 0.24 (q = 0.4224) 0.96564
	// and 0.99882, short of 0.999.
	if got := LossMin(10, 2); got != 0.25 {
		t.Errorf("LossMin(10, 2) = %v, want 0.25", got)
	}
	q := func(l float64) float64 { return 1 - (1-l)*(1-l) }
	link := func(l float64) float64 { e := binomialAtLeast(10, 2, q(l)); return 1 - (1-e)*(1-e) }
	if m := LossMin(10, 2); link(m) < 0.999 || link(m-0.01) >= 0.999 {
		t.Errorf("LossMin(10, 2) = %v: a link is slow with %v there and %v just under", m, link(m), link(m-0.01))
	}
	if got := LossPeriods(0.51, 2, 2); got != 7 {
		t.Errorf("LossPeriods(0.51, 2 links, need 2) = %d, want 7", got)
	}
	if got := LossPeriods(1, 4, 2); got != 2 {
		t.Errorf("every connect failing: %d periods, want need = 2", got)
	}
	if a, b := LossPeriods(0.4, 2, 2), LossPeriods(0.4, 4, 2); b < a {
		t.Errorf("more links took fewer periods: %d for 2, %d for 4", a, b)
	}
	if got := binomialAtLeast(3, 2, 0.5); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("P(X >= 2 of 3 at 0.5) = %v, want 0.5", got)
	}
}

// A starved voter's bound grows by StarvedLate of Need samples: at the
// campaign's 2 s period a sample takes 4 s, one period late, and one of any
// two in a row may check the policy and take 5 s, one and a half periods
// late. A period as long as the starved sample adds nothing, and one longer
// never subtracts.
func TestCPUBound(t *testing.T) {
	r := RangesOf(campaignSettings(t, 3), timeout)
	if r.Period != 2*time.Second || r.Bounds.Need != 2 {
		t.Fatalf("the campaign's period %v and need %d, want 2s and 2: the figures below are worked for those", r.Period, r.Bounds.Need)
	}
	sp := Spec{Kind: VoterCPU, Severity: Severity{CPU: cpuMin}}
	if got, want := BoundOf(sp, r, 3), r.Bounds.Publish+2.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("starved voter's bound %.2f, want %.2f (period %v)", got, want, r.Period)
	}
	for _, c := range []struct {
		period time.Duration
		want   time.Duration
	}{
		{starvedWaits*cpuPeriod - time.Millisecond, time.Millisecond},
		{starvedWaits * cpuPeriod, 0},
		{starvedWaits*cpuPeriod + time.Millisecond, 0},
	} {
		if got := StarvedSample(c.period); got != c.want {
			t.Errorf("StarvedSample(%v) = %v, want %v", c.period, got, c.want)
		}
	}
	// Need samples at 2 s: the first checks, then one of every two.
	for need, want := range map[int]time.Duration{1: 3 * time.Second, 2: 5 * time.Second, 3: 8 * time.Second, 4: 10 * time.Second} {
		if got := StarvedLate(need, 2*time.Second); got != want {
			t.Errorf("StarvedLate(%d, 2s) = %v, want %v", need, got, want)
		}
	}
	// Two checks can be j samples apart once j starved samples (4 s each)
	// reach entry_unchanged (3 periods): at a 4 s period, 12 s, three
	// samples; a nanosecond less, still three; a nanosecond more, four.
	for _, c := range []struct {
		period time.Duration
		want   int
	}{
		{4*time.Second - 1, 3}, {4 * time.Second, 3}, {4*time.Second + 1, 4},
		{time.Second, 1}, // 3 s stale: a check every sample
	} {
		if got := CheckSpan(c.period); got != c.want {
			t.Errorf("CheckSpan(%v) = %d, want %d", c.period, got, c.want)
		}
	}
	// At a period no shorter than a checked sample (5 s), nothing is late.
	if got := StarvedLate(2, 5*time.Second); got != 0 {
		t.Errorf("StarvedLate(2, 5s) = %v, want 0", got)
	}
	if got := StarvedLate(1, 5*time.Second-time.Millisecond); got != time.Millisecond {
		t.Errorf("StarvedLate(1, 5s-1ms) = %v, want 1ms", got)
	}
}

// A delay on etcd's leader holds back every write by four crossings of its
// path, and the swap's publication waits for three writes one after
// another: with 300 ms each way and a 2 s period, 3 x 1.2 s = 1.8 periods
// more than a follower's bound; on a follower, the bound is Publish.
func TestLeaderBound(t *testing.T) {
	r := RangesOf(campaignSettings(t, 3), timeout)
	sp := Spec{Kind: VoterDelay, Leader: true, Severity: Severity{Delay: Duration(300 * time.Millisecond)}}
	if got, want := BoundOf(sp, r, 3), r.Bounds.Publish+3*1.2/r.Period.Seconds(); math.Abs(got-want) > 1e-9 {
		t.Errorf("leader bound %.2f, want %.2f", got, want)
	}
	sp.Leader = false
	if got := BoundOf(sp, r, 3); got != r.Bounds.Publish {
		t.Errorf("follower bound %.2f, want %.2f", got, r.Bounds.Publish)
	}
}
