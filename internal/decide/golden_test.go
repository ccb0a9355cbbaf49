package decide_test

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

var update = flag.Bool("update", false, "rewrite the golden scenarios under testdata/")

// scenario is one golden case: a generated fleet, an optional previous
// status and settings file, and what the decision must hold (asserted
// beside the golden bytes, so that a wrong golden cannot pass): its
// verdicts and action, and the numbers that decide them, from the
// generator's model of the fleet.
//
// The fleet's entries are written as the controller reads them: a List of
// records (records.json), one per host.
type scenario struct {
	name     string
	fleet    *gFleet
	previous *status.Status
	// settingsYAML is written as settings.yaml and passed with --settings.
	settingsYAML string
	check        func(t *testing.T, st status.Status)
}

// The generator's figures (gen_test.go): a connect on the LAN is two
// one-way delays of 0.2 to 0.5 ms and up to 0.4 ms more; a slow path adds
// its delay both ways.
const lanConnect = 2*0.0005 + 0.0004

// slowConnect bounds a connect over a path slowed by oneWay seconds each
// way.
func slowConnect(oneWay float64) (lo, hi float64) {
	return 2 * (0.0002 + oneWay), 2*(0.0005+oneWay) + 0.0004
}

// The generator's slow WAL puts most fsyncs in etcd's bucket (16 ms, 32 ms],
// a healthy one's tail in (1 ms, 4 ms], a slow standby disk reads 20 ms,
// and low memory is 1 to 2 GiB available.
const (
	slowWALLo, slowWALHi       = 0.016, 0.032
	healthyWALLo, healthyWALHi = 0.001, 0.004
	slowFsync                  = 0.02
)

func k3s() settings.Settings { return settings.Defaults() }

func scenarios(t testing.TB) []scenario {
	var out []scenario
	add := func(sc scenario) { out = append(out, sc) }

	f := standardFleet(k3s())
	add(scenario{name: "all-fit", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		s := k3s()
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, status.Fit)
			for _, r := range h.Reasons {
				if r.Signal == status.SignalConnect {
					wantFigure(t, r, 0.0004, lanConnect, s.ConnectLimit().Value, true)
				}
			}
		}
		wantFigure(t, hostReason(t, st, "alpha", status.SignalMemory, ""), 9*float64(gib), 10*float64(gib), 2*float64(gib), true)
		wantFigure(t, hostReason(t, st, "delta", status.SignalFdatasync, "/var/lib/rancher/k3s/server/db/fleet-role"), 0.0021, 0.0021, s.FdatasyncLimit().Value, true)
		wantFigure(t, decisionReason(t, st, status.StepEligible, ""), 5, 5, 3, true)
		wantFigure(t, decisionReason(t, st, status.GateCooldown, ""), 7200, 7200, s.Cooldown().Value, true)
		wantNone(t, st, status.StepReplace)
	}})

	f = standardFleet(k3s())
	f.slow[pairOf("alpha", "bravo")] = 0.4
	add(scenario{name: "slow-voter-link", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "alpha", status.Unfit)
		wantVerdict(t, st, "bravo", status.Unfit)
		wantVerdict(t, st, "charlie", status.Fit)
		wantLinkNamed(t, st, "alpha", "bravo")
		wantLinkNamed(t, st, "bravo", "alpha")
		if st.Decision.Action != status.ActionSwap || !slices.Contains([]string{"alpha", "bravo"}, st.Decision.Out) {
			t.Fatalf("decision %+v, want a swap of alpha or bravo", st.Decision)
		}
		s := k3s()
		lo, hi := slowConnect(0.4)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalConnect, "bravo"), lo, hi, s.ConnectLimit().Value, false)
		wantFigure(t, hostReason(t, st, "charlie", status.SignalConnect, "alpha"), 0.0004, lanConnect, s.ConnectLimit().Value, true)
		// etcd's round trip lands in its bucket (409.6 ms, 819.2 ms]: over
		// the limit, from the bucket's interpolation.
		wantFigure(t, hostReason(t, st, "alpha", status.SignalPeerRTT, "bravo"), s.RTTLimit().Value, 0.8192, s.RTTLimit().Value, false)
		wantFigure(t, decisionReason(t, st, status.StepAttribution, ""), 1, 1, 1, true)
		wantFigure(t, decisionReason(t, st, status.StepReplace, st.Decision.Out), 1, 1, math.NaN(), true)
		wantFigure(t, decisionReason(t, st, status.StepSteady, st.Decision.Out), 3, 3, 3, true)
	}})

	// Acting plan: the same swap, its steps in the status. With the
	// standby a k3s server every guard but the approval holds; with it an
	// agent the plan says it must be reinstalled first.
	for _, server := range []bool{true, false} {
		s := k3s()
		s.Acting = settings.ActingPlan
		f = standardFleet(s)
		f.slow[pairOf("alpha", "bravo")] = 0.4
		f.k3sNodes = true
		f.host("delta").server = server
		name := "acting-plan"
		if !server {
			name = "acting-plan-agent-standby"
		}
		add(scenario{name: name, fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), settingsYAML: "acting: plan\n", check: func(t *testing.T, st status.Status) {
			wantSwap(t, st, "bravo", "delta")
			wantPlan(t, st, "bravo", "delta", server)
		}})
	}

	f = standardFleet(k3s())
	f.slow[pairOf("charlie", "alpha")] = 0.4
	f.slow[pairOf("charlie", "bravo")] = 0.4
	f.slow[pairOf("charlie", "delta")] = 0.4
	f.host("echo").wifi = true
	add(scenario{name: "standby-slow-to-leaving-voter", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "charlie"), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "delta", status.Unfit) // its link to charlie
		wantVerdict(t, st, "echo", status.Unfit)  // Wi-Fi
		wantSwap(t, st, "charlie", "delta")
		c := decisionReason(t, st, status.StepCandidate, "delta")
		if !c.OK || !strings.Contains(c.Detail, "does not count") {
			t.Fatalf("delta's candidacy: %+v", c)
		}
		if decisionReason(t, st, status.StepCandidate, "echo").OK {
			t.Fatal("echo, on Wi-Fi, was a fit candidate")
		}
		s := k3s()
		lo, hi := slowConnect(0.4)
		wantFigure(t, hostReason(t, st, "delta", status.SignalConnect, "charlie"), lo, hi, s.ConnectLimit().Value, false)
		// charlie's slow links are to the two other voters: delta's, a
		// standby's, is named on it and held only against delta.
		wantFigure(t, decisionReason(t, st, status.StepReplace, "charlie"), 2, 2, math.NaN(), true)
		if r := hostReasonBy(t, st, "charlie", status.SignalConnect, "delta"); !r.OK || r.Value != nil {
			t.Fatalf("delta's slow link on charlie: %+v", r)
		}
		// delta's headroom is its disk's: 2.1 ms of 10 ms.
		f := s.FdatasyncLimit().Value
		wantFigure(t, decisionReason(t, st, status.StepCandidate, "delta"), (f-0.0021)/f, (f-0.0021)/f, math.NaN(), true)
	}})

	mostLinks := func() *gFleet {
		f := standardFleet(k3s())
		f.slow[pairOf("alpha", "bravo")] = 0.4
		f.slow[pairOf("bravo", "charlie")] = 0.4
		f.host("echo").connect = 0.15 // fit, with less headroom than delta
		return f
	}
	f = mostLinks()
	add(scenario{name: "most-slow-links", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st status.Status) {
		for _, n := range []string{"alpha", "bravo", "charlie"} {
			wantVerdict(t, st, n, status.Unfit)
		}
		wantSwap(t, st, "bravo", "delta")
		wantFigure(t, decisionReason(t, st, status.StepReplace, "bravo"), 2, 2, math.NaN(), true)
		// echo's headroom is its connect's, 150 ms more than the LAN's;
		// delta's its disk's, larger.
		l := k3s().ConnectLimit().Value
		lo, hi := slowConnect(0)
		wantFigure(t, decisionReason(t, st, status.StepCandidate, "echo"), (l-hi-0.15)/l, (l-lo-0.15)/l, math.NaN(), true)
		f := k3s().FdatasyncLimit().Value
		wantFigure(t, decisionReason(t, st, status.StepCandidate, "delta"), (f-0.0021)/f, (f-0.0021)/f, math.NaN(), true)
	}})

	f = mostLinks()
	f.host("bravo").pinned = yes()
	add(scenario{name: "pinned-voter", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		if st.Decision.Action != status.ActionNone || st.Decision.Out != "" {
			t.Fatalf("decision %+v, want none", st.Decision)
		}
		if r := decisionReason(t, st, status.StepPinned, "bravo"); r.OK {
			t.Fatalf("pinned reason ok: %+v", r)
		}
		for _, r := range st.Decision.Reasons {
			if r.Signal == status.StepCandidate {
				t.Fatalf("a candidate was judged for a pinned voter: %+v", r)
			}
		}
		wantFigure(t, decisionReason(t, st, status.StepReplace, "bravo"), 2, 2, math.NaN(), true)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	stale := f.host("charlie")
	stale.until = f.now.Add(-5 * f.s.SamplePeriod)
	prev := settled(f, 2*time.Hour)
	prev.Hosts = append(prev.Hosts, status.Host{Name: "charlie", Observation: &status.Observation{
		Digest: decide.Digest(f.rawEntry(t, stale)), ChangedAt: f.now.Add(-4 * f.s.SamplePeriod)}})
	add(scenario{name: "stale-voter", fleet: f, previous: prev, check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "charlie", status.Unknown)
		wantVerdict(t, st, "alpha", status.Unfit)
		wantNone(t, st, status.GateReported)
		if r := decisionReason(t, st, status.GateReported, "charlie"); !strings.Contains(r.Detail, "stopped reporting") {
			t.Fatalf("gate: %+v", r)
		}
		s := k3s()
		// Seen changing four periods ago: over the three periods allowed.
		age := (4 * s.SamplePeriod).Seconds()
		wantFigure(t, hostReason(t, st, "charlie", status.SignalFreshness, ""), age, age, s.StaleAfter().Value, false)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalWALFsync, ""), slowWALLo, slowWALHi, s.WALFsyncLimit().Value, false)
	}})

	f = standardFleet(k3s())
	f.host("alpha").wifi = true
	f.hosts = append(f.hosts, &gHost{name: "foxtrot", voter: true, learner: true, eligible: yes(), pinned: no()})
	add(scenario{name: "learner-present", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		if h := hostOf(t, st, "foxtrot"); h.Role != status.RoleLearner {
			t.Fatalf("foxtrot role %s, want learner", h.Role)
		}
		wantNone(t, st, status.GateLearner)
		wantNone(t, st, status.GateMembers)
		wantFigure(t, decisionReason(t, st, status.GateMembers, ""), 4, 4, 3, false)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	add(scenario{name: "cooldown", fleet: f, previous: settled(f, 10*time.Minute), check: func(t *testing.T, st status.Status) {
		wantNone(t, st, status.GateCooldown)
		if !decisionReason(t, st, status.StepCandidate, "delta").OK {
			t.Fatal("delta should be a fit candidate; only the cooldown holds the swap")
		}
		wantFigure(t, decisionReason(t, st, status.GateCooldown, ""), 600, 600, k3s().Cooldown().Value, false)
	}})

	f = standardFleet(k3s())
	for _, h := range f.hosts {
		h.samples = 60
	}
	add(scenario{name: "too-few-samples", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, status.Unknown)
			wantFigure(t, hostReason(t, st, h.Name, status.SignalSamples, ""), 60, 60, float64(k3s().Window), false)
		}
		wantNone(t, st, status.GateReported)
	}})

	f = standardFleet(k3s())
	f.host("alpha").wifi = true
	for _, h := range f.hosts {
		h.eligible, h.pinned = nil, nil
	}
	// A host neither voter nor eligible records nothing.
	f.host("delta").noEntry, f.host("echo").noEntry = true, true
	add(scenario{name: "none-eligible", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "alpha", status.Unfit)
		wantNone(t, st, status.StepEligible)
		if len(st.Hosts) != 3 {
			t.Fatalf("%d hosts reported, want the 3 voters", len(st.Hosts))
		}
		if r := decisionReason(t, st, status.StepEligible, ""); !strings.Contains(r.Detail, "verdicts only") {
			t.Fatalf("eligible: %+v", r)
		}
		// The verdicts still carry their numbers.
		wantFigure(t, hostReason(t, st, "bravo", status.SignalWALFsync, ""), healthyWALLo, healthyWALHi, k3s().WALFsyncLimit().Value, true)
	}})

	f = standardFleet(k3s())
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		f.host(n).eligible = no()
	}
	add(scenario{name: "fewer-eligible-than-target", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		wantNone(t, st, status.StepEligible)
		if r := decisionReason(t, st, status.StepEligible, ""); !strings.Contains(r.Detail, "refused: 2 hosts") {
			t.Fatalf("eligible: %+v", r)
		}
		wantFigure(t, decisionReason(t, st, status.StepEligible, ""), 2, 2, 3, false)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	f.host("echo").raw = `{"v":2,"node":"echo","n":0,"dt_ms":[],"link":[],"mem_total_kib":[],"mem_available_kib":[]}`
	add(scenario{name: "malformed-entry", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "alpha"), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "echo", status.Unknown)
		if r := hostOf(t, st, "echo").Reasons[0]; r.Signal != status.SignalEntry || !strings.Contains(r.Detail, "unsupported version 2") {
			t.Fatalf("echo's first reason: %+v", r)
		}
		wantSwap(t, st, "alpha", "delta")
		wantFigure(t, hostReason(t, st, "alpha", status.SignalWALFsync, ""), slowWALLo, slowWALHi, k3s().WALFsyncLimit().Value, false)
	}})

	// k3s on an external datastore: no node carries the etcd role.
	f = &gFleet{s: k3s(), now: baseNow, slow: map[[2]string]float64{}, hosts: []*gHost{
		{name: "alpha", eligible: yes()}, {name: "bravo", eligible: yes()}, {name: "charlie", eligible: yes()}}}
	add(scenario{name: "no-etcd", fleet: f, check: func(t *testing.T, st status.Status) {
		wantNone(t, st, status.StepEtcd)
		// Every host is judged as a standby, by its own disk.
		for _, n := range []string{"alpha", "bravo", "charlie"} {
			wantFigure(t, hostReason(t, st, n, status.SignalFdatasync, "/var/lib/rancher/k3s/server/db/fleet-role"), 0.0021, 0.0021, k3s().FdatasyncLimit().Value, true)
		}
	}})

	etcdTiming := "# etcd's own timing: heartbeat 100 ms, election timeout 1000 ms\nelection_timeout: 1000ms\nheartbeat_interval: 100ms\n"
	s, err := settings.Parse([]byte(etcdTiming), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	f = standardFleet(s)
	f.slow[pairOf("alpha", "bravo")] = 0.03 // a 60 ms round trip: fit on k3s, not under 100 ms/1000 ms
	f.slow[pairOf("alpha", "charlie")] = 0.03
	add(scenario{name: "etcd-timing", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "alpha"), settingsYAML: etcdTiming, check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "alpha", status.Unfit)
		wantSwap(t, st, "alpha", "delta")
		// 60 ms over the path: fit under k3s's 250 ms, over etcd's 50 ms.
		lo, hi := slowConnect(0.03)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalConnect, "bravo"), lo, hi, s.ConnectLimit().Value, false)
		wantFigure(t, hostReason(t, st, "bravo", status.SignalConnect, "charlie"), 0.0004, lanConnect, s.ConnectLimit().Value, true)
		wantFigure(t, decisionReason(t, st, status.StepReplace, "alpha"), 2, 2, math.NaN(), true)
	}})

	// A stall of the whole machine: every connect slow, every host unfit,
	// no host to blame.
	f = standardFleet(k3s())
	for _, h := range f.hosts {
		h.connect = 0.3
	}
	add(scenario{name: "every-link-slow", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, status.Unfit)
		}
		wantNone(t, st, status.StepAttribution)
		lo, hi := slowConnect(0)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalConnect, "bravo"), lo+0.3, hi+0.3, k3s().ConnectLimit().Value, false)
		// Two of the three voters touch every slow link: not a minority.
		wantFigure(t, decisionReason(t, st, status.StepAttribution, ""), 2, 2, 1, false)
	}})

	// What a stall of between one and two periods leaves: alpha caught two
	// slow samples, bravo and charlie one each (forgiven by the tail).
	f = standardFleet(k3s())
	residue := func(k int) func(i, n int) float64 {
		return func(i, n int) float64 {
			if i >= n-k-3 && i < n-3 {
				return 0.3
			}
			return 0
		}
	}
	f.host("alpha").stall, f.host("bravo").stall, f.host("charlie").stall = residue(2), residue(1), residue(1)
	add(scenario{name: "stall-residue", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "alpha", status.Unfit)
		wantVerdict(t, st, "bravo", status.Unfit) // its link to alpha
		wantNone(t, st, status.StepAttribution)
		// alpha's two slow samples reach its tail; bravo's one is forgiven,
		// and bravo is unfit by alpha's measurement alone.
		l := k3s().ConnectLimit().Value
		lo, hi := slowConnect(0)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalConnect, "bravo"), lo+0.3, hi+0.3, l, false)
		wantFigure(t, hostReason(t, st, "bravo", status.SignalConnect, "alpha"), lo, hi, l, true)
		wantFigure(t, hostReasonBy(t, st, "bravo", status.SignalConnect, "alpha"), lo+0.3, hi+0.3, l, false)
		wantFigure(t, decisionReason(t, st, status.StepAttribution, ""), 1, 1, 1, false)
	}})

	fiveVoters := "# five voters\ntarget_voters: 5\nmax_servers: 7\n"
	s5, err := settings.Parse([]byte(fiveVoters), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	f = &gFleet{s: s5, now: baseNow, slow: map[[2]string]float64{}}
	for _, n := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		f.hosts = append(f.hosts, &gHost{name: n, voter: true, eligible: yes(), pinned: no()})
	}
	f.hosts = append(f.hosts, &gHost{name: "foxtrot", eligible: yes(), pinned: no()})
	for _, n := range []string{"alpha", "charlie", "delta", "echo", "foxtrot"} {
		f.slow[pairOf("bravo", n)] = 0.4
	}
	add(scenario{name: "slow-voter-of-five", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), settingsYAML: fiveVoters, check: func(t *testing.T, st status.Status) {
		wantSwap(t, st, "bravo", "foxtrot")
		wantFigure(t, decisionReason(t, st, status.StepAttribution, ""), 1, 1, 2, true)
		wantFigure(t, decisionReason(t, st, status.StepReplace, "bravo"), 4, 4, math.NaN(), true)
		wantFigure(t, decisionReason(t, st, status.GateMembers, ""), 5, 5, 5, true)
	}})

	f = standardFleet(k3s())
	for _, n := range []string{"alpha", "bravo", "delta"} {
		f.host(n).slowWAL = true
	}
	add(scenario{name: "fleet-wide-disk", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		for _, n := range []string{"alpha", "bravo", "delta"} {
			wantVerdict(t, st, n, status.Unfit)
		}
		wantNone(t, st, status.StepFleetWide)
		// Three of the five recording hosts over a disk limit: more than
		// half of five.
		wantFigure(t, decisionReason(t, st, status.StepFleetWide, "disk"), 3, 3, 2.5, false)
		wantFigure(t, hostReason(t, st, "delta", status.SignalFdatasync, "/var/lib/rancher/k3s/server/db/fleet-role"), slowFsync, slowFsync, k3s().FdatasyncLimit().Value, false)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL, f.host("alpha").pinned = true, yes()
	f.host("bravo").lowMem = true
	add(scenario{name: "pinned-disk-beside-memory", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st status.Status) {
		wantSwap(t, st, "bravo", "delta")
		if r := decisionReason(t, st, status.StepPinned, "alpha"); !r.OK {
			t.Fatalf("pinned: %+v", r)
		}
		// bravo's quota is etcd's own, 2 GiB.
		wantFigure(t, hostReason(t, st, "bravo", status.SignalMemory, ""), float64(gib), 2*float64(gib), 2*float64(gib), false)
		wantFigure(t, decisionReason(t, st, status.StepReplace, "bravo"), 0, 0, math.NaN(), true)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	add(scenario{name: "swap-held", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		wantNone(t, st, status.StepSteady)
		if st.Memory.Named != "alpha" || st.Memory.NamedDecisions != 1 {
			t.Fatalf("memory %+v", st.Memory)
		}
		// Named at this decision: no voter has written since.
		wantFigure(t, decisionReason(t, st, status.StepSteady, "alpha"), 0, 0, 3, false)
	}})

	// A voter starved of CPU: its timer wakes about 900 ms late every
	// period, and nothing else it reads moves (lab/cmd/votercpu: its disks,
	// the connects to it and its memory did not). It is swapped by
	// wakeup_late alone.
	f = standardFleet(k3s())
	f.host("charlie").late = starvedLate
	add(scenario{name: "starved-voter", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "charlie"), check: func(t *testing.T, st status.Status) {
		wantSwap(t, st, "charlie", "delta")
		l := k3s().WakeupLimit().Value
		wantFigure(t, hostReason(t, st, "charlie", status.SignalWakeup, ""), 0.85, 0.95, l, false)
		for _, n := range []string{"alpha", "bravo", "delta", "echo"} {
			wantVerdict(t, st, n, status.Fit)
			wantFigure(t, hostReason(t, st, n, status.SignalWakeup, ""), 0.001, 0.016, l, true)
		}
		for _, r := range hostOf(t, st, "charlie").Reasons {
			if !r.OK && r.Signal != status.SignalWakeup {
				t.Fatalf("charlie is unfit by %s too: %s", r.Signal, r.Detail)
			}
		}
		// One of five recording hosts starved: no shared fault.
		wantFigure(t, decisionReason(t, st, status.StepFleetWide, "cpu"), 1, 1, 2.5, true)
	}})

	// Every host starved of CPU at once (one machine, a hypervisor over
	// committed): every host unfit, a fault the fleet shares, no swap.
	f = standardFleet(k3s())
	for _, h := range f.hosts {
		h.late = starvedLate
	}
	add(scenario{name: "fleet-wide-cpu", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st status.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, status.Unfit)
		}
		wantNone(t, st, status.StepFleetWide)
		wantFigure(t, decisionReason(t, st, status.StepFleetWide, "cpu"), 5, 5, 2.5, false)
		l := k3s().WakeupLimit().Value
		for _, h := range st.Hosts {
			wantFigure(t, hostReason(t, st, h.Name, status.SignalWakeup, ""), 0.85, 0.95, l, false)
		}
	}})

	// A record written around the admission policy, owned by another
	// node's Node: read as unreadable, its host unknown and no candidate.
	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	f.host("echo").record = func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Name = "delta" }
	add(scenario{name: "unreadable-record", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "alpha"), check: func(t *testing.T, st status.Status) {
		wantVerdict(t, st, "echo", status.Unknown)
		if r := hostOf(t, st, "echo").Reasons[0]; r.Signal != status.SignalEntry || !strings.Contains(r.Detail, `owned by Node "delta"`) {
			t.Fatalf("echo's first reason: %+v", r)
		}
		if r := decisionReason(t, st, status.StepCandidate, "echo"); r.OK {
			t.Fatalf("echo's candidacy: %+v", r)
		}
		wantSwap(t, st, "alpha", "delta")
		// The record that cannot be read is not counted among the records,
		// nor among the recording hosts the fleet-wide rule counts: one
		// slow disk of four is not more than half.
		if st.Records.Count != 4 || hostOf(t, st, "echo").RecordBytes != 0 {
			t.Fatalf("records %+v, echo's %d bytes", st.Records, hostOf(t, st, "echo").RecordBytes)
		}
		wantFigure(t, decisionReason(t, st, status.StepFleetWide, "disk"), 1, 1, 2, true)
		wantFigure(t, hostReason(t, st, "alpha", status.SignalWALFsync, ""), slowWALLo, slowWALHi, k3s().WALFsyncLimit().Value, false)
		f := k3s().FdatasyncLimit().Value
		wantFigure(t, decisionReason(t, st, status.StepCandidate, "delta"), (f-0.0021)/f, (f-0.0021)/f, math.NaN(), true)
	}})
	return out
}

func TestGoldenScenarios(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", sc.name)
			inputs := sc.inputs(t)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, b := range inputs {
					writeFile(t, filepath.Join(dir, name), b)
				}
			}
			// The files on disk are what the generator makes now.
			for name, want := range inputs {
				if got := readFile(t, filepath.Join(dir, name)); !bytes.Equal(got, want) {
					t.Fatalf("%s is out of date with the generator; run go test ./internal/decide -run TestGoldenScenarios -update", name)
				}
			}
			args := []string{"decide", "--probe", filepath.Join(dir, sc.recordsFile()), "--nodes", filepath.Join(dir, "nodes.json"),
				"--now", strings.TrimSpace(string(inputs["now"]))}
			if _, ok := inputs["previous.json"]; ok {
				args = append(args, "--previous", filepath.Join(dir, "previous.json"))
			}
			if _, ok := inputs["settings.yaml"]; ok {
				args = append(args, "--settings", filepath.Join(dir, "settings.yaml"))
			}
			jsonOut, code := runCLICode(t, append(args, "-o", "json"))
			tableOut, tableCode := runCLICode(t, append(args, "-o", "table"))
			if tableCode != code {
				t.Fatalf("decide exits %d with -o table and %d with -o json", tableCode, code)
			}
			if st, err := status.UnmarshalStatus(jsonOut); err != nil {
				t.Fatal(err)
			} else {
				wantDecisionCode(t, st, code)
			}
			if *update {
				writeFile(t, filepath.Join(dir, "status.json"), jsonOut)
				writeFile(t, filepath.Join(dir, "table.txt"), tableOut)
			}
			if want := readFile(t, filepath.Join(dir, "status.json")); !bytes.Equal(jsonOut, want) {
				t.Errorf("fleet-role decide -o json differs from status.json (run with -update if the change is meant):\n%s", jsonOut)
			}
			if want := readFile(t, filepath.Join(dir, "table.txt")); !bytes.Equal(tableOut, want) {
				t.Errorf("fleet-role decide -o table differs from table.txt:\n%s", tableOut)
			}

			// The core called directly gives the same bytes as the CLI.
			st := decide.Decide(sc.input(t))
			kube.WithActing(&st, sc.fleet.nodes().Items, sc.fleet.s, sc.fleet.now, nil)
			b, err := st.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, jsonOut) {
				t.Fatal("decide.Decide and fleet-role decide disagree")
			}
			if !st.DryRun {
				t.Fatal("status is not dry-run")
			}
			sc.check(t, st)
			wantTypedAsWords(t, st)
		})
	}
}

// recordsFile is the file that holds the scenario's entries.
func (sc scenario) recordsFile() string { return "records.json" }

// input is the decision's input, read from the records.
func (sc scenario) input(t testing.TB) decide.Input { return sc.fleet.input(t, sc.previous) }

func (sc scenario) inputs(t testing.TB) map[string][]byte {
	f := sc.fleet
	in := map[string][]byte{
		"nodes.json": mustJSON(t, f.nodes()),
		"now":        []byte(f.now.Format(time.RFC3339) + "\n"),
	}
	in[sc.recordsFile()] = mustJSON(t, f.records(t))
	if sc.previous != nil {
		b, err := sc.previous.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		in["previous.json"] = b
	}
	if sc.settingsYAML != "" {
		in["settings.yaml"] = []byte(sc.settingsYAML)
	}
	return in
}

func runCLI(t *testing.T, args []string) []byte {
	t.Helper()
	out, code := runCLICode(t, args)
	if code != 0 {
		t.Fatalf("fleet-role %s: exit %d", strings.Join(args, " "), code)
	}
	return out
}

// runCLICode runs the command line and returns what it printed and its
// exit code, failing the test on anything on stderr: decide's exit 1 (a
// swap) is an answer, not an error.
func runCLICode(t *testing.T, args []string) ([]byte, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, &out, &errb)
	if errb.Len() > 0 || code > 1 {
		t.Fatalf("fleet-role %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.Bytes(), code
}

// wantDecisionCode fails unless code is the exit code decide and status
// give st's decision: 1 for a swap, 0 for none.
func wantDecisionCode(t *testing.T, st *status.Status, code int) {
	t.Helper()
	want := 0
	if st.Decision.Action == status.ActionSwap {
		want = 1
	}
	if code != want {
		t.Fatalf("exit %d for decision %s, want %d", code, st.Decision.Action, want)
	}
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hostOf(t *testing.T, st status.Status, name string) status.Host {
	t.Helper()
	for _, h := range st.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s in the status", name)
	return status.Host{}
}

func wantVerdict(t *testing.T, st status.Status, name string, v status.Verdict) {
	t.Helper()
	if h := hostOf(t, st, name); h.Verdict != v {
		t.Fatalf("%s is %s, want %s; reasons: %+v", name, h.Verdict, v, h.Reasons)
	}
}

func wantSwap(t *testing.T, st status.Status, out, in string) {
	t.Helper()
	d := st.Decision
	if d.Action != status.ActionSwap || d.Out != out || d.In != in {
		t.Fatalf("decision %s %s -> %s, want swap %s -> %s; reasons: %+v", d.Action, d.Out, d.In, out, in, d.Reasons)
	}
}

// wantPlan asserts acting plan's step table for the swap of out for in:
// every step of the vocabulary in order, writes only where a step changes
// something, and, for a standby that is a k3s server, every guard of the
// first step holding but the approval, which acting plan never gives; for
// an agent, the plan held by standby_server with the reinstall named.
func wantPlan(t *testing.T, st status.Status, out, in string, server bool) {
	t.Helper()
	if st.Acting == nil || st.Acting.Mode != settings.ActingPlan || st.Acting.Plan == nil || st.Acting.Journal != nil {
		t.Fatalf("acting %+v, want mode plan with a plan and no journal", st.Acting)
	}
	p := st.Acting.Plan
	if p.Out.Node != out || p.In.Node != in || p.Out.MemberID == "" || p.ID != acting.PlanID(out, p.Out.MemberID, in) {
		t.Fatalf("plan %s: %s (member %s) for %s, want %s for %s", p.ID, p.Out.Node, p.Out.MemberID, p.In.Node, out, in)
	}
	var names []acting.StepName
	for _, s := range p.Steps {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, acting.Steps) {
		t.Fatalf("steps %v, want %v", names, acting.Steps)
	}
	admit := p.Steps[0]
	for _, g := range admit.Guards {
		want := g.Code != acting.GuardApproval && (server || g.Code != acting.GuardStandbyServer)
		if g.OK != want {
			t.Errorf("admit guard %s ok %v, want %v: %s", g.Code, g.OK, want, g.Detail)
		}
	}
	if p.Ready != server || (p.Remedy == "") != server {
		t.Errorf("ready %v, remedy %q; want ready %v and a remedy only for an agent", p.Ready, p.Remedy, server)
	}
	if w := admit.Writes; len(w) != 1 || w[0].Host != in || w[0].Content != acting.DropInVoter || !w[0].Restart {
		t.Errorf("admit writes %+v, want the voter drop-in on %s and a restart", w, in)
	}
	// Each later step is judged on the fleet as the steps before it leave
	// it: the standby a voter before prewrite, four members before remove.
	for _, s := range p.Steps[1:] {
		for _, g := range s.Guards {
			if !g.OK {
				t.Errorf("%s guard %s does not hold on the fleet the steps before it leave: %s", s.Name, g.Code, g.Detail)
			}
		}
	}
	if st.Acting.Plan.Steps[4].State != acting.StateSkipped {
		t.Errorf("move-leader %s, want skipped: %s does not lead", p.Steps[4].State, out)
	}
}

// wantNone asserts no swap, held back by a failed reason of signal.
func wantNone(t *testing.T, st status.Status, signal string) {
	t.Helper()
	if st.Decision.Action != status.ActionNone || st.Decision.Out != "" || st.Decision.In != "" {
		t.Fatalf("decision %+v, want none", st.Decision)
	}
	for _, r := range st.Decision.Reasons {
		if r.Signal == signal && !r.OK {
			return
		}
	}
	t.Fatalf("no failed %s among the decision's reasons: %+v", signal, st.Decision.Reasons)
}

func decisionReason(t *testing.T, st status.Status, signal, subject string) status.Reason {
	t.Helper()
	for _, r := range st.Decision.Reasons {
		if r.Signal == signal && r.Subject == subject {
			return r
		}
	}
	t.Fatalf("no %s %q among the decision's reasons: %+v", signal, subject, st.Decision.Reasons)
	return status.Reason{}
}

// wantLinkNamed asserts that host names other in a failed link reason.
func wantLinkNamed(t *testing.T, st status.Status, host, other string) {
	t.Helper()
	for _, r := range hostOf(t, st, host).Reasons {
		if (r.Signal == status.SignalConnect || r.Signal == status.SignalPeerRTT) && r.Subject == other && !r.OK {
			return
		}
	}
	t.Fatalf("%s does not name its slow link to %s", host, other)
}

// hostReason is host's own reason of signal about subject.
func hostReason(t *testing.T, st status.Status, host, signal, subject string) status.Reason {
	t.Helper()
	for _, r := range hostOf(t, st, host).Reasons {
		if r.Signal == signal && r.Subject == subject && !strings.HasPrefix(r.Detail, "measured by ") {
			return r
		}
	}
	t.Fatalf("%s has no %s %q reason of its own", host, signal, subject)
	return status.Reason{}
}

// hostReasonBy is the reason of signal that by measured of its link to
// host and that is named on host.
func hostReasonBy(t *testing.T, st status.Status, host, signal, by string) status.Reason {
	t.Helper()
	for _, r := range hostOf(t, st, host).Reasons {
		if r.Signal == signal && r.Subject == by && strings.HasPrefix(r.Detail, "measured by "+by+": ") {
			return r
		}
	}
	t.Fatalf("%s has no %s reason measured by %s", host, signal, by)
	return status.Reason{}
}

// wantFigure asserts a reason's numbers: its value within [lo, hi] (a
// thousandth of the value's size either side, for the figures that are
// ratios of floats), its limit (NaN: none), and whether it is ok.
func wantFigure(t *testing.T, r status.Reason, lo, hi, limit float64, ok bool) {
	t.Helper()
	slack := 1e-9 + 1e-3*math.Max(math.Abs(lo), math.Abs(hi))
	switch {
	case r.Value == nil:
		t.Fatalf("%s %s has no value, want %v to %v: %+v", r.Signal, r.Subject, lo, hi, r)
	case *r.Value < lo-slack || *r.Value > hi+slack:
		t.Fatalf("%s %s: value %v, want %v to %v: %s", r.Signal, r.Subject, *r.Value, lo, hi, r.Detail)
	case math.IsNaN(limit) != (r.Limit == nil) || r.Limit != nil && math.Abs(*r.Limit-limit) > 1e-9:
		t.Fatalf("%s %s: limit %v, want %v: %s", r.Signal, r.Subject, deref(r.Limit), limit, r.Detail)
	case r.OK != ok:
		t.Fatalf("%s %s: ok %v, want %v: %s", r.Signal, r.Subject, r.OK, ok, r.Detail)
	}
}
