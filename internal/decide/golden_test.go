package decide_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
)

var update = flag.Bool("update", false, "rewrite the golden scenarios under testdata/")

// scenario is one golden case: a generated fleet, an optional previous
// status and settings file, and what the decision must hold (asserted
// beside the golden bytes, so that a wrong golden cannot pass).
type scenario struct {
	name     string
	fleet    *gFleet
	previous *decide.Status
	// settingsYAML is written as settings.yaml and passed with --settings.
	settingsYAML string
	check        func(t *testing.T, st decide.Status)
}

func k3s() settings.Settings { return settings.Defaults() }

func scenarios(t testing.TB) []scenario {
	var out []scenario
	add := func(sc scenario) { out = append(out, sc) }

	f := standardFleet(k3s())
	add(scenario{name: "all-fit", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, decide.Fit)
		}
		wantNone(t, st, decide.StepReplace)
	}})

	f = standardFleet(k3s())
	f.slow[pairOf("alpha", "bravo")] = 0.4
	add(scenario{name: "slow-voter-link", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "alpha", decide.Unfit)
		wantVerdict(t, st, "bravo", decide.Unfit)
		wantVerdict(t, st, "charlie", decide.Fit)
		wantLinkNamed(t, st, "alpha", "bravo")
		wantLinkNamed(t, st, "bravo", "alpha")
		if st.Decision.Action != decide.ActionSwap || !slices.Contains([]string{"alpha", "bravo"}, st.Decision.Out) {
			t.Fatalf("decision %+v, want a swap of alpha or bravo", st.Decision)
		}
	}})

	f = standardFleet(k3s())
	f.slow[pairOf("charlie", "alpha")] = 0.4
	f.slow[pairOf("charlie", "bravo")] = 0.4
	f.slow[pairOf("charlie", "delta")] = 0.4
	f.host("echo").wifi = true
	add(scenario{name: "standby-slow-to-leaving-voter", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "charlie"), check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "delta", decide.Unfit) // its link to charlie
		wantVerdict(t, st, "echo", decide.Unfit)  // Wi-Fi
		wantSwap(t, st, "charlie", "delta")
		c := decisionReason(t, st, decide.StepCandidate, "delta")
		if !c.OK || !strings.Contains(c.Detail, "does not count") {
			t.Fatalf("delta's candidacy: %+v", c)
		}
		if decisionReason(t, st, decide.StepCandidate, "echo").OK {
			t.Fatal("echo, on Wi-Fi, was a fit candidate")
		}
	}})

	mostLinks := func() *gFleet {
		f := standardFleet(k3s())
		f.slow[pairOf("alpha", "bravo")] = 0.4
		f.slow[pairOf("bravo", "charlie")] = 0.4
		f.host("echo").connect = 0.15 // fit, with less headroom than delta
		return f
	}
	f = mostLinks()
	add(scenario{name: "most-slow-links", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st decide.Status) {
		for _, n := range []string{"alpha", "bravo", "charlie"} {
			wantVerdict(t, st, n, decide.Unfit)
		}
		wantSwap(t, st, "bravo", "delta")
		r := decisionReason(t, st, decide.StepReplace, "bravo")
		if r.Value == nil || *r.Value != 2 {
			t.Fatalf("bravo's slow links: %+v", r)
		}
		if !decisionReason(t, st, decide.StepCandidate, "echo").OK {
			t.Fatal("echo is fit but was no candidate")
		}
	}})

	f = mostLinks()
	f.host("bravo").pinned = yes()
	add(scenario{name: "pinned-voter", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		if st.Decision.Action != decide.ActionNone || st.Decision.Out != "" {
			t.Fatalf("decision %+v, want none", st.Decision)
		}
		if r := decisionReason(t, st, decide.StepPinned, "bravo"); r.OK {
			t.Fatalf("pinned reason ok: %+v", r)
		}
		for _, r := range st.Decision.Reasons {
			if r.Signal == decide.StepCandidate {
				t.Fatalf("a candidate was judged for a pinned voter: %+v", r)
			}
		}
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	stale := f.host("charlie")
	stale.until = f.now.Add(-5 * f.s.SamplePeriod)
	prev := settled(f, 2*time.Hour)
	prev.Hosts = append(prev.Hosts, decide.Host{Name: "charlie", Observation: &decide.Observation{
		Digest: decide.Digest(f.rawEntry(t, stale)), ChangedAt: f.now.Add(-4 * f.s.SamplePeriod)}})
	add(scenario{name: "stale-voter", fleet: f, previous: prev, check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "charlie", decide.Unknown)
		wantVerdict(t, st, "alpha", decide.Unfit)
		wantNone(t, st, decide.GateReported)
		if r := decisionReason(t, st, decide.GateReported, "charlie"); !strings.Contains(r.Detail, "stopped reporting") {
			t.Fatalf("gate: %+v", r)
		}
	}})

	f = standardFleet(k3s())
	f.host("alpha").wifi = true
	f.hosts = append(f.hosts, &gHost{name: "foxtrot", voter: true, learner: true, eligible: yes(), pinned: no()})
	add(scenario{name: "learner-present", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		if h := hostOf(t, st, "foxtrot"); h.Role != decide.RoleLearner {
			t.Fatalf("foxtrot role %s, want learner", h.Role)
		}
		wantNone(t, st, decide.GateLearner)
		wantNone(t, st, decide.GateMembers)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	add(scenario{name: "cooldown", fleet: f, previous: settled(f, 10*time.Minute), check: func(t *testing.T, st decide.Status) {
		wantNone(t, st, decide.GateCooldown)
		if !decisionReason(t, st, decide.StepCandidate, "delta").OK {
			t.Fatal("delta should be a fit candidate; only the cooldown holds the swap")
		}
	}})

	f = standardFleet(k3s())
	for _, h := range f.hosts {
		h.samples = 60
	}
	add(scenario{name: "too-few-samples", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, decide.Unknown)
		}
		wantNone(t, st, decide.GateReported)
	}})

	f = standardFleet(k3s())
	f.host("alpha").wifi = true
	for _, h := range f.hosts {
		h.eligible, h.pinned = nil, nil
	}
	// A host neither voter nor eligible records nothing.
	f.host("delta").noEntry, f.host("echo").noEntry = true, true
	add(scenario{name: "none-eligible", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "alpha", decide.Unfit)
		wantNone(t, st, decide.StepEligible)
		if len(st.Hosts) != 3 {
			t.Fatalf("%d hosts reported, want the 3 voters", len(st.Hosts))
		}
		if r := decisionReason(t, st, decide.StepEligible, ""); !strings.Contains(r.Detail, "verdicts only") {
			t.Fatalf("eligible: %+v", r)
		}
	}})

	f = standardFleet(k3s())
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		f.host(n).eligible = no()
	}
	add(scenario{name: "fewer-eligible-than-target", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		wantNone(t, st, decide.StepEligible)
		if r := decisionReason(t, st, decide.StepEligible, ""); !strings.Contains(r.Detail, "refused: 2 hosts") {
			t.Fatalf("eligible: %+v", r)
		}
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	f.host("echo").raw = `{"v":2,"node":"echo","n":0,"dt_ms":[],"link":[],"mem_total_kib":[],"mem_available_kib":[]}`
	add(scenario{name: "malformed-entry", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "alpha"), check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "echo", decide.Unknown)
		if r := hostOf(t, st, "echo").Reasons[0]; r.Signal != decide.SignalEntry || !strings.Contains(r.Detail, "unsupported version 2") {
			t.Fatalf("echo's first reason: %+v", r)
		}
		wantSwap(t, st, "alpha", "delta")
	}})

	// k3s on an external datastore: no node carries the etcd role.
	f = &gFleet{s: k3s(), now: baseNow, slow: map[[2]string]float64{}, hosts: []*gHost{
		{name: "alpha", eligible: yes()}, {name: "bravo", eligible: yes()}, {name: "charlie", eligible: yes()}}}
	add(scenario{name: "no-etcd", fleet: f, check: func(t *testing.T, st decide.Status) {
		wantNone(t, st, decide.StepEtcd)
	}})

	etcdTiming := "# etcd's own timing: heartbeat 100 ms, election timeout 1000 ms\nelection_timeout: 1000ms\nheartbeat_interval: 100ms\n"
	s, err := settings.Parse([]byte(etcdTiming), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	f = standardFleet(s)
	f.slow[pairOf("alpha", "bravo")] = 0.03 // a 60 ms round trip: fit on k3s, not under 100 ms/1000 ms
	f.slow[pairOf("alpha", "charlie")] = 0.03
	add(scenario{name: "etcd-timing", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "alpha"), settingsYAML: etcdTiming, check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "alpha", decide.Unfit)
		wantSwap(t, st, "alpha", "delta")
	}})

	// A stall of the whole machine: every connect slow, every host unfit,
	// no host to blame.
	f = standardFleet(k3s())
	for _, h := range f.hosts {
		h.connect = 0.3
	}
	add(scenario{name: "every-link-slow", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		for _, h := range st.Hosts {
			wantVerdict(t, st, h.Name, decide.Unfit)
		}
		wantNone(t, st, decide.StepAttribution)
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
	add(scenario{name: "stall-residue", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		wantVerdict(t, st, "alpha", decide.Unfit)
		wantVerdict(t, st, "bravo", decide.Unfit) // its link to alpha
		wantNone(t, st, decide.StepAttribution)
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
	add(scenario{name: "slow-voter-of-five", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), settingsYAML: fiveVoters, check: func(t *testing.T, st decide.Status) {
		wantSwap(t, st, "bravo", "foxtrot")
		if r := decisionReason(t, st, decide.StepAttribution, ""); !r.OK || *r.Value != 1 {
			t.Fatalf("attribution: %+v", r)
		}
	}})

	f = standardFleet(k3s())
	for _, n := range []string{"alpha", "bravo", "delta"} {
		f.host(n).slowWAL = true
	}
	add(scenario{name: "fleet-wide-disk", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		for _, n := range []string{"alpha", "bravo", "delta"} {
			wantVerdict(t, st, n, decide.Unfit)
		}
		wantNone(t, st, decide.StepFleetWide)
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL, f.host("alpha").pinned = true, yes()
	f.host("bravo").lowMem = true
	add(scenario{name: "pinned-disk-beside-memory", fleet: f, previous: namedBefore(settled(f, 2*time.Hour), "bravo"), check: func(t *testing.T, st decide.Status) {
		wantSwap(t, st, "bravo", "delta")
		if r := decisionReason(t, st, decide.StepPinned, "alpha"); !r.OK {
			t.Fatalf("pinned: %+v", r)
		}
	}})

	f = standardFleet(k3s())
	f.host("alpha").slowWAL = true
	add(scenario{name: "swap-held", fleet: f, previous: settled(f, 2*time.Hour), check: func(t *testing.T, st decide.Status) {
		wantNone(t, st, decide.StepSteady)
		if st.Memory.Named != "alpha" || st.Memory.NamedDecisions != 1 {
			t.Fatalf("memory %+v", st.Memory)
		}
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
			args := []string{"decide", "--probe", filepath.Join(dir, "probe.json"), "--nodes", filepath.Join(dir, "nodes.json"),
				"--now", strings.TrimSpace(string(inputs["now"]))}
			if _, ok := inputs["previous.json"]; ok {
				args = append(args, "--previous", filepath.Join(dir, "previous.json"))
			}
			if _, ok := inputs["settings.yaml"]; ok {
				args = append(args, "--settings", filepath.Join(dir, "settings.yaml"))
			}
			jsonOut := runCLI(t, append(args, "-o", "json"))
			tableOut := runCLI(t, append(args, "-o", "table"))
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
			st := decide.Decide(sc.fleet.input(t, sc.previous))
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
		})
	}
}

func (sc scenario) inputs(t testing.TB) map[string][]byte {
	f := sc.fleet
	cm := f.probeConfigMap(t)
	in := map[string][]byte{
		"probe.json": mustJSON(t, cm),
		"nodes.json": mustJSON(t, f.nodes()),
		"now":        []byte(f.now.Format(time.RFC3339) + "\n"),
	}
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
	var out, errb bytes.Buffer
	if code := cli.Main(args, &out, &errb); code != 0 {
		t.Fatalf("fleet-role %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.Bytes()
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

func hostOf(t *testing.T, st decide.Status, name string) decide.Host {
	t.Helper()
	for _, h := range st.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s in the status", name)
	return decide.Host{}
}

func wantVerdict(t *testing.T, st decide.Status, name string, v decide.Verdict) {
	t.Helper()
	if h := hostOf(t, st, name); h.Verdict != v {
		t.Fatalf("%s is %s, want %s; reasons: %+v", name, h.Verdict, v, h.Reasons)
	}
}

func wantSwap(t *testing.T, st decide.Status, out, in string) {
	t.Helper()
	d := st.Decision
	if d.Action != decide.ActionSwap || d.Out != out || d.In != in {
		t.Fatalf("decision %s %s -> %s, want swap %s -> %s; reasons: %+v", d.Action, d.Out, d.In, out, in, d.Reasons)
	}
}

// wantNone asserts no swap, held back by a failed reason of signal.
func wantNone(t *testing.T, st decide.Status, signal string) {
	t.Helper()
	if st.Decision.Action != decide.ActionNone || st.Decision.Out != "" || st.Decision.In != "" {
		t.Fatalf("decision %+v, want none", st.Decision)
	}
	for _, r := range st.Decision.Reasons {
		if r.Signal == signal && !r.OK {
			return
		}
	}
	t.Fatalf("no failed %s among the decision's reasons: %+v", signal, st.Decision.Reasons)
}

func decisionReason(t *testing.T, st decide.Status, signal, subject string) decide.Reason {
	t.Helper()
	for _, r := range st.Decision.Reasons {
		if r.Signal == signal && r.Subject == subject {
			return r
		}
	}
	t.Fatalf("no %s %q among the decision's reasons: %+v", signal, subject, st.Decision.Reasons)
	return decide.Reason{}
}

// wantLinkNamed asserts that host names other in a failed link reason.
func wantLinkNamed(t *testing.T, st decide.Status, host, other string) {
	t.Helper()
	for _, r := range hostOf(t, st, host).Reasons {
		if (r.Signal == decide.SignalConnect || r.Signal == decide.SignalPeerRTT) && r.Subject == other && !r.OK {
			return
		}
	}
	t.Fatalf("%s does not name its slow link to %s", host, other)
}
