package testkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
)

// Clocked drives probe loops on one fake clock: it steps the clock a period
// each time every loop still running has finished the period before (its
// metrics count each period's work when it ends), so that the loops run
// period after period as fast as their work allows and no test waits a
// period in real time; a period never sees the clock move while it runs.
// The work itself (the API server's, the host readings') is real, and each
// wait has a real deadline for it. internal/probe's tests run their loops
// on it in memory, test/integration/probe's on a real API server.
type Clocked struct {
	// Clock is the fake clock the loops run on; a Sampler that stamps
	// its samples on it sees them a period apart, as the loops do.
	Clock  *clocktesting.FakeClock
	period time.Duration

	mu    sync.Mutex
	loops []*Periods
	steps int
}

// NewClocked is a fake clock stepped a period at a time.
func NewClocked(period time.Duration) *Clocked {
	return &Clocked{Clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Millisecond)), period: period}
}

// Periods counts the periods one loop has begun, by its lists of the Nodes
// (the first thing a period does), and those it has ended, by its metrics.
// It is the loop's kube.Nodes.
type Periods struct {
	// Metrics are the loop's: they count the periods ended.
	Metrics *probe.Metrics
	inner   kube.Nodes
	base    int // the clock's steps when the loop was added

	mu      sync.Mutex
	n       int
	stopped bool
}

// List counts a period begun and lists the Nodes.
func (p *Periods) List(ctx context.Context) ([]corev1.Node, error) {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return p.inner.List(ctx)
}

// Begun is how many periods the loop has begun.
func (p *Periods) Begun() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Ended is how many periods the loop has ended: the count of its
// fleet_role_probe_tick_seconds, observed as each period's work ends.
func (p *Periods) Ended() int {
	fams, err := p.Metrics.Registry.Gather()
	if err != nil {
		panic(err) // the registry holds the probe's own collectors only
	}
	for _, f := range fams {
		if f.GetName() == "fleet_role_probe_tick_seconds" {
			return int(f.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// Stop takes the loop out of what the clock waits for.
func (p *Periods) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// Watch counts the periods of the loop that lists nodes through the
// returned Periods and is given its Metrics.
func (c *Clocked) Watch(nodes kube.Nodes) *Periods {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &Periods{inner: nodes, Metrics: probe.NewMetrics(), base: c.steps}
	c.loops = append(c.loops, p)
	return p
}

// Config is cfg on c's clock, its Nodes and Metrics counted by p.
func (c *Clocked) Config(cfg probe.Config, p *Periods) probe.Config {
	cfg.Nodes, cfg.Metrics, cfg.Clock = p, p.Metrics, c.Clock
	return cfg
}

// Step moves the clock a period when every loop still running has ended
// every period so far; the tick it sends then waits in the loop's ticker.
func (c *Clocked) Step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	running := 0
	for _, l := range c.loops {
		l.mu.Lock()
		stopped := l.stopped
		l.mu.Unlock()
		if stopped {
			continue
		}
		running++
		if l.Ended() < c.steps-l.base+1 {
			return
		}
	}
	if running > 0 {
		c.Clock.Step(c.period)
		c.steps++
	}
}

// Await steps the clock until cond holds, and fails the test with cond's
// last error when it has not within a real deadline.
func (c *Clocked) Await(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	Eventually(t, within, func() error {
		err := cond()
		if err != nil {
			c.Step()
			c.mu.Lock()
			defer c.mu.Unlock()
			return fmt.Errorf("%d periods of the fake clock: %w", c.steps, err)
		}
		return nil
	})
}

// Running is one probe loop started by a test on a Clocked clock.
type Running struct {
	Node    string
	Prober  *probe.Prober
	Sampler *Sampler // the test's Sampler, when it gave one
	Store   *kubefake.CountingRecords
	Log     *Log
	Periods *Periods
	*Loop
}

// Stop stops the loop, and the clock stops waiting for it.
func (r *Running) Stop(t testing.TB) {
	t.Helper()
	r.Periods.Stop()
	r.Loop.Stop(t)
}

// StartProbe runs a probe for node on clk's clock with its own client (its
// own token of the probe ServiceAccount).
func (c *Cluster) StartProbe(t testing.TB, clk *Clocked, s settings.Settings, node string, sampler probe.Sampler) *Running {
	t.Helper()
	cl := c.ProbeClient(t, node)
	return StartProbeWith(t, clk, s, node, sampler, cl.Records(s.RecordsNamespace()), cl.Nodes())
}

// StartProbeWith runs a probe for node on clk's clock with store and nodes.
// A Sampler without a clock is given clk's.
func StartProbeWith(t testing.TB, clk *Clocked, s settings.Settings, node string, sampler probe.Sampler, store kube.Records, nodes kube.Nodes) *Running {
	t.Helper()
	r := &Running{Node: node, Store: &kubefake.CountingRecords{Inner: store}, Log: NewLog(), Periods: clk.Watch(nodes)}
	if ps, ok := sampler.(*Sampler); ok {
		r.Sampler = ps
	}
	if r.Sampler != nil && r.Sampler.Clock == nil {
		r.Sampler.Clock = clk.Clock
	}
	p, err := probe.New(clk.Config(probe.Config{Node: node, Settings: s, Records: r.Store, Sampler: sampler, Log: r.Log.Logger}, r.Periods))
	if err != nil {
		t.Fatal(err)
	}
	r.Prober = p
	r.Loop = Go(t, "probe "+node, p.Run)
	return r
}

// HoldsExactly says whether e holds exactly want (to the millisecond, with
// Fit's sequence numbers), or why not.
func HoldsExactly(e entry.Entry, want []entry.Sample) error {
	got := Millis(e.Samples)
	if !slices.Equal(got, Millis(want)) {
		return fmt.Errorf("entry %s holds %d samples at %v, want %d at %v", e.Node, len(got), got, len(want), Millis(want))
	}
	for i := range want {
		if Seq(e.Samples[i]) != Seq(want[i]) {
			return fmt.Errorf("entry %s sample %d is seq %d, want %d", e.Node, i, Seq(e.Samples[i]), Seq(want[i]))
		}
	}
	return nil
}
