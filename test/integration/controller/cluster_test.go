package controller

// These tests run the controller, and the probes that feed it, on a real
// kube-apiserver (on a real etcd) with deploy/fleet-role.yaml applied
// server-side and real RBAC: the controller acts with a token of the
// fleet-role ServiceAccount, each probe with its own token of
// fleet-role-probe (TokenRequest). The kubelet is the only fake: there is
// none, so no pod runs; the Nodes are created through the API with the labels
// and annotations k3s sets, and the loops run here in-process. The probes
// take their samples from a Sampler of the test's own (testkit.Sampler), so
// that each host's verdict is known in advance.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// diskBounds are etcd's disk histogram buckets (1 ms doubling, 14 bounds).
var diskBounds = func() []float64 {
	b := make([]float64, 14)
	for i, v := 0, 0.001; i < len(b); i, v = i+1, v*2 {
		b[i] = v
	}
	return b
}()

// walIn makes a sample maker whose etcd WAL fsyncs all fall in bucket b
// (bucket 1: 1 to 2 ms, fit; bucket 5: 16 to 32 ms, over etcd's 10 ms).
func walIn(b int) func(probe.Plan, int, time.Time) entry.Sample {
	return func(plan probe.Plan, seq int, at time.Time) entry.Sample {
		x := testkit.Fit(plan, seq, at)
		if x.Etcd != nil {
			h := quantile.Histogram{Bounds: diskBounds, Counts: make([]uint64, len(diskBounds)+1)}
			h.Counts[b] = 120
			x.Etcd.WALFsync = h
		}
		return x
	}
}

func startProbe(t *testing.T, c *testkit.Cluster, s settings.Settings, node string, sampler *testkit.Sampler) (*testkit.Loop, *testkit.Log) {
	t.Helper()
	cl := c.ProbeClient(t, node)
	log := testkit.NewLog()
	p, err := probe.New(probe.Config{Node: node, Settings: s, Records: cl.Records(s.RecordsNamespace()), Nodes: cl.Nodes(), Sampler: sampler, Log: log.Logger})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Go(t, "probe "+node, p.Run), log
}

func hostOf(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

func verdicts(st *status.Status) map[string]status.Verdict {
	out := map[string]status.Verdict{}
	for _, h := range st.Hosts {
		out[h.Name] = h.Verdict
	}
	return out
}

// Probes on five hosts feed the controller; the status it publishes is what
// a reader expects: every recorded host with its verdict, the swap of the
// slow-disk voter for the fit standby once the cooldown has passed. A
// malformed entry written by hand makes that host unknown with the error and
// leaves the others decided.
func TestStatusOnAPIServer(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	// The cooldown runs from the first decision when there is no previous
	// status: learner_stall_time 0 leaves one window of it.
	s.LearnerStallTime = 0
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.7.1"},
		testkit.Node{Name: "server-2", Voter: true, Eligible: true, Address: "127.0.7.2"},
		testkit.Node{Name: "server-3", Voter: true, Eligible: true, Address: "127.0.7.3"},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.7.4"},
		testkit.Node{Name: "agent-2", Eligible: true, Address: "127.0.7.5"},
		testkit.Node{Name: "agent-3", Eligible: true, Address: "127.0.7.6"},
		testkit.Node{Name: "agent-4", Address: "127.0.7.7"},
	)
	slowDisk := func(ctx context.Context) entry.FsyncReading {
		f := testkit.FitFsync(time.Now())
		f.P99Seconds = 0.05
		return f
	}
	samplers := map[string]*testkit.Sampler{
		"server-1": {Make: walIn(1)},
		"server-2": {Make: walIn(1)},
		"server-3": {Make: walIn(5)},
		"agent-1":  {},
		"agent-2":  {FsyncReading: slowDisk},
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for k := range samplers {
			if !yield(k) {
				return
			}
		}
	}) {
		startProbe(t, c, s, n, samplers[n])
	}
	cl := c.Client(t, testkit.ControllerSA)
	store := &kubefake.CountingConfigMaps{Inner: cl.ConfigMaps(s.Namespace)}
	metrics := controller.NewMetrics()
	log := testkit.NewLog()
	sink, err := cl.EventSink()
	if err != nil {
		t.Fatal(err)
	}
	events := nodeevents.Start(sink, kube.EventComponent, nil, log.Logger)
	defer events.Stop()
	ctrl, err := controller.New(controller.Config{Settings: s, Store: store, Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes(), Log: log.Logger, Metrics: metrics,
		Events: events})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	cl0 := testkit.Go(t, "controller", ctrl.Run)

	var st *status.Status
	testkit.Eventually(t, 2*time.Minute, func() error {
		var err error
		if st, err = c.Status(t); err != nil {
			return err
		}
		if st.Decision.Action != status.ActionSwap {
			return fmt.Errorf("decision %s: %s", st.Decision.Action, firstFailed(st.Decision.Reasons))
		}
		return nil
	})
	t.Logf("the controller decided a swap %.1f s after it started (cooldown %v)", time.Since(began).Seconds(), s.Cooldown().Duration())
	if !st.DryRun || st.Schema != status.Schema || st.GeneratedAt.IsZero() {
		t.Errorf("status dry_run %v schema %q generated_at %v", st.DryRun, st.Schema, st.GeneratedAt)
	}
	if st.Decision.Out != "server-3" || st.Decision.In != "agent-1" {
		t.Errorf("swap out %s in %s, want out server-3 (its WAL fsyncs are over 10 ms) in agent-1 (agent-2's disk is slow)", st.Decision.Out, st.Decision.In)
	}
	want := map[string]status.Verdict{"server-1": status.Fit, "server-2": status.Fit, "server-3": status.Unfit,
		"agent-1": status.Fit, "agent-2": status.Unfit, "agent-3": status.Unknown}
	if got := verdicts(st); !mapsEqual(got, want) {
		t.Errorf("verdicts %v, want %v (agent-4 records nothing and is not listed)", got, want)
	}
	for _, h := range st.Hosts {
		if h.Name != "agent-3" && (h.Samples < s.Window || h.Observation == nil) {
			t.Errorf("%s: %d samples, observation %v", h.Name, h.Samples, h.Observation)
		}
	}
	if v := metricValue(t, metrics.Registry, "fleet_role_host_verdict", map[string]string{"host": "server-3", "verdict": "unfit"}); v != 1 {
		t.Errorf("fleet_role_host_verdict{host=server-3,verdict=unfit} = %v, want 1", v)
	}
	if v := metricValue(t, metrics.Registry, "fleet_role_swap", map[string]string{"out": "server-3", "in": "agent-1"}); v != 1 {
		t.Errorf("fleet_role_swap{out=server-3,in=agent-1} = %v, want 1", v)
	}
	cl0.Alive(t)
	checkEvents(t, c)

	// A malformed entry, written by hand as the admin (kubectl patch).
	bad := `{"v":1,"node":"agent-3","n":2}`
	if err := c.WriteRecord(context.Background(), "agent-3", bad); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		var err error
		if st, err = c.Status(t); err != nil {
			return err
		}
		h := hostOf(st, "agent-3")
		if h == nil || h.Verdict != status.Unknown || len(h.Reasons) == 0 || h.Reasons[0].Signal != status.SignalEntry ||
			h.Reasons[0].Code != status.CodeRecordUnreadable {
			return fmt.Errorf("agent-3 is %+v", h)
		}
		return nil
	})
	want["agent-3"] = status.Unknown
	if got := verdicts(st); !mapsEqual(got, want) {
		t.Errorf("with agent-3's entry malformed: verdicts %v, want %v", got, want)
	}
	if st.Decision.Action != status.ActionSwap || st.Decision.Out != "server-3" || st.Decision.In != "agent-1" {
		t.Errorf("with agent-3's entry malformed the decision is %s %s -> %s", st.Decision.Action, st.Decision.Out, st.Decision.In)
	}
	t.Logf("agent-3 with a malformed entry: %s: %s", hostOf(st, "agent-3").Verdict, hostOf(st, "agent-3").Reasons[0].Detail)
	// One line per change of the decision, not one per round.
	decisions := log.Records("decision")
	rounds := metricValue(t, metrics.Registry, "fleet_role_decisions_total", map[string]string{"result": "ok"})
	if len(decisions) == 0 || decisions[len(decisions)-1]["action"] != "swap" || float64(len(decisions)) > rounds/2 {
		t.Errorf("%d decision lines logged in %v rounds: %v", len(decisions), rounds, decisions)
	}
	t.Logf("%v rounds, %d decision changes logged: %v", rounds, len(decisions), decisions)
}

func firstFailed(rs []status.Reason) string {
	for _, r := range rs {
		if !r.OK {
			return r.Signal + " " + r.Subject + ": " + r.Detail
		}
	}
	return ""
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// metricValue is the value of the series of name with labels, or -1.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// The controller writes status.json only when the document changed apart
// from its timestamp, and at least once a window. Driven tick by tick on a
// clock of the test's own against the real API server, with the entries left
// as written: the first decision is written (tick 0); the entries go stale
// after three periods, a change written at tick 4; then nothing changes and
// it writes once a window, at ticks 24 and 44.
func TestWritesOnlyOnChange(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	voters := []string{"server-1", "server-2", "server-3"}
	for i, v := range voters {
		c.AddNodes(t, testkit.Node{Name: v, Voter: true, Eligible: true, Address: fmt.Sprintf("127.0.8.%d", i+1)})
	}
	c.AddNodes(t, testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.8.9"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now().UTC().Truncate(time.Second)
	for i, n := range append(slices.Clone(voters), "agent-1") {
		self := i
		if n == "agent-1" {
			self = -1
		}
		text, err := entry.Encode(testkit.RealisticEntry(n, voters, self, s.Window, s.SamplePeriod, t0))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteRecord(ctx, n, text); err != nil {
			t.Fatal(err)
		}
	}
	cl := c.Client(t, testkit.ControllerSA)
	store := &kubefake.CountingConfigMaps{Inner: cl.ConfigMaps(s.Namespace)}
	clk := clocktesting.NewFakeClock(t0)
	metrics := controller.NewMetrics()
	ctrl, err := controller.New(controller.Config{Settings: s, Store: store, Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes(), Metrics: metrics, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const ticks = 61
	var wrote []int
	window := time.Duration(s.Window) * s.SamplePeriod
	for i := range ticks {
		_, before, _ := store.Counts()
		st, err := ctrl.Tick(ctx)
		if err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		if _, after, _ := store.Counts(); after > before {
			wrote = append(wrote, i)
		}
		// A reader can always tell the controller is alive: what the
		// ConfigMap holds is never older than a window.
		got, err := c.Status(t)
		if err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		if age := clk.Now().Sub(got.GeneratedAt); age >= window {
			t.Errorf("tick %d: the status read was generated %v ago, a window or more", i, age)
		}
		if i == 3 || i == 4 {
			t.Logf("tick %d: verdicts %v", i, verdicts(st))
		}
		clk.Step(s.SamplePeriod)
	}
	if want := []int{0, 4, 24, 44}; !slices.Equal(wrote, want) {
		t.Errorf("wrote at ticks %v, want %v", wrote, want)
	}
	if v := metricValue(t, metrics.Registry, "fleet_role_status_writes_total", nil); v != float64(len(wrote)) {
		t.Errorf("fleet_role_status_writes_total = %v, want %d", v, len(wrote))
	}
	t.Logf("%d decisions, %d writes of status.json (at ticks %v), window %d periods", ticks, len(wrote), wrote, s.Window)
}

// The API server stops for a while (less than a window) and starts again:
// eight probes and the controller never exit, the probes go on sampling with
// the Nodes they last read, and every sample taken meanwhile arrives (the
// window is written whole at the next write). The controller is not ready
// after three periods without a decision, and ready again after.
func TestAPIServerRestart(t *testing.T) {
	c := testkit.Start(t)
	// The outage lasts about as long as the API server takes to start
	// again (3 to 5 s here); a 400 ms period makes the window 8 s.
	s := testkit.Settings(t, 400*time.Millisecond)
	var names []string
	for i := range 8 {
		n := testkit.Node{Name: fmt.Sprintf("agent-%d", i+1), Eligible: true, Address: fmt.Sprintf("127.0.9.%d", i+1)}
		if i < 3 {
			n.Name, n.Voter = fmt.Sprintf("server-%d", i+1), true
		}
		c.AddNodes(t, n)
		names = append(names, n.Name)
	}
	samplers := map[string]*testkit.Sampler{}
	probes := map[string]*testkit.Loop{}
	logs := map[string]*testkit.Log{}
	for _, n := range names {
		samplers[n] = &testkit.Sampler{}
		probes[n], logs[n] = startProbe(t, c, s, n, samplers[n])
	}
	cl := c.Client(t, testkit.ControllerSA)
	metrics := controller.NewMetrics()
	ctrl, err := controller.New(controller.Config{Settings: s, Store: cl.ConfigMaps(s.Namespace), Records: testkit.RecordSource(t, cl, s.RecordsNamespace()), Nodes: cl.Nodes(), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	cloop := testkit.Go(t, "controller", ctrl.Run)
	testkit.Eventually(t, time.Minute, func() error {
		for _, n := range names {
			if e, ok := c.Entry(t, n); !ok || len(e.Samples) < 2 {
				return fmt.Errorf("%s has not written two samples", n)
			}
		}
		if _, err := c.Status(t); err != nil {
			return err
		}
		return readyErr(ctrl)
	})

	before := map[string]int{}
	for _, n := range names {
		before[n] = len(samplers[n].Taken())
	}
	stopped := time.Now()
	c.Server.Stop()
	testkit.Eventually(t, time.Minute, func() error {
		for _, n := range names {
			if got := len(samplers[n].Taken()) - before[n]; got < 3 {
				return fmt.Errorf("%s took %d samples since the API server stopped", n, got)
			}
		}
		if err := readyErr(ctrl); err == nil {
			return errors.New("the controller is still ready")
		}
		return nil
	})
	notReady := readyErr(ctrl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(stopped)
	during := map[string][]entry.Sample{}
	for _, n := range names {
		all := samplers[n].Taken()
		during[n] = all[before[n]:]
	}
	// Every sample taken while the API server was away arrives.
	testkit.Eventually(t, time.Minute, func() error {
		for _, n := range names {
			e, ok := c.Entry(t, n)
			if !ok {
				return fmt.Errorf("%s's entry is gone", n)
			}
			have := map[int64]bool{}
			for _, x := range e.Samples {
				have[x.At.UnixMilli()] = true
			}
			for _, x := range during[n] {
				if !have[x.At.UnixMilli()] {
					return fmt.Errorf("%s: sample seq %d taken at %v during the outage is not in the ConfigMap", n, testkit.Seq(x), x.At)
				}
			}
		}
		return readyErr(ctrl)
	})
	mostDuring := 0
	for _, n := range names {
		probes[n].Alive(t)
		mostDuring = max(mostDuring, len(during[n]))
		if len(logs[n].Records("write record failed; the window is kept and sent again next period")) == 0 {
			t.Errorf("%s logged no failed write during the outage", n)
		}
	}
	cloop.Alive(t)
	if mostDuring >= s.Window {
		t.Fatalf("the outage took %d samples, a window or more: the test no longer tests an outage shorter than a window", mostDuring)
	}
	st, err := c.Status(t)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if st, err = c.Status(t); err != nil {
			return err
		}
		if !st.GeneratedAt.After(stopped.Add(outage)) {
			return fmt.Errorf("the status was generated at %v, before the API server came back", st.GeneratedAt)
		}
		return nil
	})
	fails := metricValue(t, metrics.Registry, "fleet_role_decisions_total", map[string]string{"result": "error"})
	if fails < 3 {
		t.Errorf("fleet_role_decisions_total{result=error} = %v, want the failed rounds of the outage counted", fails)
	}
	t.Logf("API server away %.1f s (window %v): 8 probes took up to %d samples meanwhile, all arrived; the controller failed %v rounds and said %q, then decided again",
		outage.Seconds(), time.Duration(s.Window)*s.SamplePeriod, mostDuring, fails, notReady)
}

// checkEvents holds the Events the controller recorded on the Nodes, as
// kubectl describe node shows them: server-3, unfit and advised out, has a
// Warning for each; server-1's first full window made it fit (from
// unknown): Normal; agent-4, which the decision never lists, has none.
func checkEvents(t *testing.T, c *testkit.Cluster) {
	t.Helper()
	kubectl, kc := testenv.Kubectl(t), c.Kubeconfig(t, "")
	events := func(node string) (string, error) {
		out, err := exec.Command(kubectl, "--kubeconfig", kc, "describe", "node", node).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl describe node %s: %v\n%s", node, err, out)
		}
		_, ev, _ := strings.Cut(string(out), "\nEvents:")
		return strings.Join(strings.Fields(ev), " "), nil
	}
	want := map[string][]string{
		"server-3": {"Warning SwapAdvised", "fleet-role would swap this voter out for agent-1 (dry run: nothing is changed)", "judges this voter unfit (was unknown): wal_fsync"},
		"server-1": {"Normal Fit", "fleet-role judges this voter fit (was unknown)"},
		"agent-4":  {"<none>"},
	}
	for node, words := range want {
		var got string
		testkit.Eventually(t, time.Minute, func() (err error) {
			if got, err = events(node); err != nil {
				return err
			}
			for _, w := range words {
				if !strings.Contains(got, w) {
					return fmt.Errorf("kubectl describe node %s: its Events lack %q: %s", node, w, got)
				}
			}
			return nil
		})
		t.Logf("kubectl describe node %s, Events: %s", node, got)
	}
}

// readyErr is the controller's readiness as an error, its note aside.
func readyErr(c *controller.Controller) error {
	_, err := c.Ready()
	return err
}
