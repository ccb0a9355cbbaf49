package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/probetest"
)

// clocked drives probe loops on one fake clock: it steps the clock a period
// each time every loop still running has finished the period before (its
// metrics count each period's work when it ends), so that the loops run
// period after period as fast as their work allows and no test waits a
// period in real time; a period never sees the clock move while it runs.
// The work itself (the API server's, the host readings') is real, and each
// wait has a real deadline for it.
type clocked struct {
	clk    *clocktesting.FakeClock
	period time.Duration

	mu    sync.Mutex
	loops []*periods
	steps int
}

func newClocked(period time.Duration) *clocked {
	return &clocked{clk: clocktesting.NewFakeClock(time.Now().Truncate(time.Millisecond)), period: period}
}

// periods counts the periods one loop has begun, by its lists of the Nodes
// (the first thing a period does), and those it has ended, by its metrics.
type periods struct {
	inner   kube.Nodes
	metrics *probe.Metrics // the loop's: they count the periods ended
	base    int            // the clock's steps when the loop was added

	mu      sync.Mutex
	n       int
	stopped bool
}

func (p *periods) List(ctx context.Context) ([]corev1.Node, error) {
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return p.inner.List(ctx)
}

// begun is how many periods the loop has begun.
func (p *periods) begun() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// ended is how many periods the loop has ended: the count of its
// fleet_role_probe_tick_seconds, observed as each period's work ends.
func (p *periods) ended() int {
	fams, err := p.metrics.Registry.Gather()
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

// stop takes the loop out of what the clock waits for.
func (p *periods) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// watch counts the periods of the loop that lists nodes through the
// returned Nodes and is given its Metrics.
func (c *clocked) watch(nodes kube.Nodes) *periods {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &periods{inner: nodes, metrics: probe.NewMetrics(), base: c.steps}
	c.loops = append(c.loops, p)
	return p
}

// config is cfg on c's clock, its Nodes and Metrics counted by p.
func (c *clocked) config(cfg probe.Config, p *periods) probe.Config {
	cfg.Nodes, cfg.Metrics, cfg.Clock = p, p.metrics, c.clk
	return cfg
}

// step moves the clock a period when every loop still running has ended
// every period so far; the tick it sends then waits in the loop's ticker.
func (c *clocked) step() {
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
		if l.ended() < c.steps-l.base+1 {
			return
		}
	}
	if running > 0 {
		c.clk.Step(c.period)
		c.steps++
	}
}

// await steps the clock until cond holds, and fails the test with cond's
// last error when it has not within a real deadline.
func (c *clocked) await(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	probetest.Eventually(t, within, func() error {
		err := cond()
		if err != nil {
			c.step()
			c.mu.Lock()
			defer c.mu.Unlock()
			return fmt.Errorf("%d periods of the fake clock: %w", c.steps, err)
		}
		return nil
	})
}

// firstPeriod runs a probe with cfg on a fake clock until it has ended its
// first period, and stops it before a second begins.
func firstPeriod(t *testing.T, cfg probe.Config) {
	t.Helper()
	c := newClocked(cfg.Settings.SamplePeriod)
	periods := c.watch(cfg.Nodes)
	p, err := probe.New(c.config(cfg, periods))
	if err != nil {
		t.Fatal(err)
	}
	loop := probetest.Go(t, "probe "+cfg.Node, p.Run)
	probetest.Eventually(t, time.Minute, func() error {
		if n := periods.ended(); n < 1 {
			return fmt.Errorf("%s has ended %d periods", cfg.Node, n)
		}
		return nil
	})
	periods.stop()
	loop.Stop(t)
}
