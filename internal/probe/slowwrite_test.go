package probe_test

import (
	"context"
	"fmt"
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
	p, err := probe.New(probe.Config{Node: "agent-1", Settings: s, Records: store, Nodes: nodes, Sampler: sampler, Clock: fc,
		FlushTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	defer func() {
		cancel()
		for { // any last write the stop makes, let through
			select {
			case err := <-stopped:
				if err != nil {
					t.Error(err)
				}
				return
			case <-store.entered:
				store.release <- struct{}{}
			}
		}
	}()
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
