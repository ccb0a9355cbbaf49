package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// heldRecords is a record store whose writes each wait until the test lets
// them through, as a write to etcd waits on a slow leader's path. A fake:
// what is tested is the loop's timing, which a real API server's would make
// depend on the machine.
type heldRecords struct {
	*kubefake.Records
	entered chan string   // each write's entry, as it begins
	release chan struct{} // one receive lets one write through
}

func (h *heldRecords) Put(ctx context.Context, owner record.Owner, text string) error {
	h.entered <- text
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Records.Put(ctx, owner, text)
}

// A write slower than a period holds no sample back: the loop takes one
// each period while the write is in flight, and the write, once through,
// is followed at once, with no period's wait, by one that holds every
// sample taken meanwhile. Run before the change, the loop took no sample
// until the write was through.
func TestSlowWritesHoldNoSampleBack(t *testing.T) {
	s := testkit.Settings(t, time.Second)
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	store := &heldRecords{Records: kubefake.NewRecords(s.RecordsNamespace()), entered: make(chan string), release: make(chan struct{})}
	sampler := &testkit.Sampler{Clock: fc}
	defer runHeld(t, probe.Config{Node: "agent-1", Settings: s, Records: store, Nodes: nodes, Sampler: sampler, Clock: fc,
		FlushTimeout: time.Second}, store)()
	samplesIn := func(text string) int {
		e, err := entry.Decode(text)
		if err != nil {
			t.Fatalf("a write's entry: %v", err)
		}
		return len(e.Samples)
	}
	await := func(what string, cond func() bool) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, func() error {
			if !cond() {
				return fmt.Errorf("waiting for %s", what)
			}
			return nil
		})
	}
	// The first period's write begins, and is held.
	if n := samplesIn(<-store.entered); n != 1 {
		t.Fatalf("the first write holds %d samples, want 1", n)
	}
	// Two periods pass with the write held: each takes its sample. The
	// loop waits on its ticker and on the write's deadline, both at the
	// next period: step only once both wait.
	for want := 2; want <= 3; want++ {
		await("the loop to wait for the next period", func() bool { return fc.Waiters() >= 2 })
		fc.Step(s.SamplePeriod)
		await(fmt.Sprintf("sample %d", want), func() bool { return len(sampler.Taken()) == want })
	}
	// Through: the next write follows with no step of the clock, and holds
	// the three.
	store.release <- struct{}{}
	select {
	case text := <-store.entered:
		if n := samplesIn(text); n != 3 {
			t.Fatalf("the write after the held one holds %d samples, want 3", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no write followed the held one within 30 s with the clock still")
	}
	store.release <- struct{}{}
	// Nothing changed since: no third write until the next sample.
	select {
	case text := <-store.entered:
		t.Fatalf("a write with nothing new: %d samples", samplesIn(text))
	case <-time.After(200 * time.Millisecond):
	}
	if got := len(sampler.Taken()); got != 3 {
		t.Fatalf("%d samples taken, want 3", got)
	}
}

// runHeld runs the probe cfg makes and returns its stop, which cancels the
// run and waits for it, letting through any last write the stop makes to
// held (nil: none is held).
func runHeld(t *testing.T, cfg probe.Config, held *heldRecords) (stop func()) {
	t.Helper()
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	var entered <-chan string
	if held != nil {
		entered = held.entered
	}
	return func() {
		cancel()
		for {
			select {
			case err := <-stopped:
				if err != nil {
					t.Error(err)
				}
				return
			case <-entered:
				held.release <- struct{}{}
			}
		}
	}
}

// heldPolicy finds the policy in force; every check after the first waits
// until the test lets it through, as a check waits on a slow leader's path.
// A fake, as heldRecords.
type heldPolicy struct {
	mu      sync.Mutex
	checks  int
	release chan struct{}
}

func (h *heldPolicy) CheckRefused(ctx context.Context, _ record.Owner) error {
	h.mu.Lock()
	h.checks++
	first := h.checks == 1
	h.mu.Unlock()
	if first {
		return nil
	}
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldPolicy) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checks
}

// countedRecords counts the writes of the record.
type countedRecords struct {
	*kubefake.Records
	mu     sync.Mutex
	writes int
}

func (c *countedRecords) Put(ctx context.Context, owner record.Owner, text string) error {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Records.Put(ctx, owner, text)
}

func (c *countedRecords) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// The check of the policy that falls due once every entry_unchanged, after
// one saw the refusal, runs beside the writes: held for two periods, it
// holds back neither period's write. Run before the change, the write
// waited for the check.
func TestSlowPolicyCheckHoldsNoWriteBack(t *testing.T) {
	s := testkit.Settings(t, time.Second)
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	store := &countedRecords{Records: kubefake.NewRecords(s.RecordsNamespace())}
	pol := &heldPolicy{release: make(chan struct{})}
	m := probe.NewMetrics()
	defer runHeld(t, probe.Config{Node: "agent-1", Settings: s, Records: store, Nodes: nodes, Policy: pol,
		Sampler: &testkit.Sampler{Clock: fc}, Clock: fc, FlushTimeout: time.Second, Metrics: m}, nil)()
	await := func(what string, cond func() bool) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, func() error {
			if !cond() {
				return fmt.Errorf("waiting for %s: %d checks, %d writes", what, pol.count(), store.count())
			}
			return nil
		})
	}
	// A period's work has ended, or waits for the next period on its
	// deadline beside the ticker: the clock may step.
	steps := 0
	step := func() {
		t.Helper()
		await("the loop to wait for the next period", func() bool { return ticksEnded(t, m) > steps || fc.Waiters() >= 2 })
		fc.Step(s.SamplePeriod)
		steps++
	}
	// The first check, answered at once, and the first write.
	await("the first write", func() bool { return store.count() == 1 })
	// Step to the period the second check falls due in: entry_unchanged
	// after the first.
	due := int((s.StaleAfter().Duration() + s.SamplePeriod - 1) / s.SamplePeriod)
	for range due {
		step()
	}
	await("the second check", func() bool { return pol.count() == 2 })
	writes := store.count()
	if writes != due+1 {
		t.Fatalf("%d writes by the period the second check fell due in, want %d", writes, due+1)
	}
	// Held two periods: each period's write still lands.
	for i := 1; i <= 2; i++ {
		step()
		await(fmt.Sprintf("write %d with the check held", writes+i), func() bool { return store.count() == writes+i })
	}
	if n := pol.count(); n != 2 {
		t.Fatalf("%d checks, want 2: a check ran while one was held", n)
	}
	pol.release <- struct{}{}
}

// ticksEnded is how many periods' work the probe has ended, by its
// fleet_role_probe_tick_seconds.
func ticksEnded(t *testing.T, m *probe.Metrics) int {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "fleet_role_probe_tick_seconds" {
			return int(f.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	return 0
}
