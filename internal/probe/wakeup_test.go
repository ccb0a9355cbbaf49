package probe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/wakeup"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The host's sampler records the wake-up timer's largest lateness since the
// previous sample: none before a timer has fallen due (the first sample
// after a start), then a reading each sample.
func TestHostRecordsTheWakeUpLateness(t *testing.T) {
	ctx := context.Background()
	// A timer of a minute has not fallen due at a sample taken at once.
	slow := &probe.Host{HostRoot: "/", Wakeup: wakeup.New(time.Minute)}
	stop := slow.StartBeside(ctx)
	s, _ := slow.Sample(ctx, probe.Plan{})
	stop()
	if s.WakeupLateSeconds != nil {
		t.Fatalf("the first sample after a start has a wake-up reading: %v", *s.WakeupLateSeconds)
	}

	h := &probe.Host{HostRoot: "/", Wakeup: wakeup.New(5 * time.Millisecond)}
	stop = h.StartBeside(ctx)
	defer stop()
	testkit.Eventually(t, 30*time.Second, func() error {
		s, _ = h.Sample(ctx, probe.Plan{})
		if s.WakeupLateSeconds == nil {
			return errNoReading
		}
		return nil
	})
	if late := *s.WakeupLateSeconds; late < 0 {
		t.Fatalf("lateness %v", late)
	}

	// A sampler without the timer takes no reading, and has nothing to
	// start.
	none := &probe.Host{HostRoot: "/"}
	none.StartBeside(ctx)()
	if s, _ := none.Sample(ctx, probe.Plan{}); s.WakeupLateSeconds != nil {
		t.Fatalf("no timer, a reading: %v", *s.WakeupLateSeconds)
	}
}

var errNoReading = errors.New("no wake-up reading yet")

// besideSampler records when its reading beside the loop starts and stops.
type besideSampler struct {
	testkit.Sampler
	mu                 sync.Mutex
	events             []string
	startedBeforeFirst bool
}

func (b *besideSampler) StartBeside(ctx context.Context) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, "start")
	b.startedBeforeFirst = len(b.Taken()) == 0
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.events = append(b.events, "stop")
	}
}

func (b *besideSampler) Events() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.events...)
}

// Run starts the reading beside the loop before its first sample, once, and
// stops it when it returns: it lives as long as the loop.
func TestRunStartsAndStopsTheReadingBeside(t *testing.T) {
	s := testkit.Settings(t, 50*time.Millisecond)
	store := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	b := &besideSampler{}
	clk := testkit.NewClocked(s.SamplePeriod)
	r := testkit.StartProbeWith(t, clk, s, "agent-1", b, store, nodes)
	clk.Await(t, 30*time.Second, func() error {
		if len(b.Taken()) < 3 {
			return fmt.Errorf("%d samples, want 3", len(b.Taken()))
		}
		return nil
	})
	if ev := b.Events(); len(ev) != 1 || ev[0] != "start" {
		t.Fatalf("while the loop runs: %v, want [start]", ev)
	}
	r.Cancel()
	r.Stop(t)
	if ev := b.Events(); len(ev) != 2 || ev[1] != "stop" {
		t.Fatalf("after the loop returned: %v, want [start stop]", ev)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.startedBeforeFirst {
		t.Error("the reading beside the loop started after the first sample")
	}
}

var _ probe.Beside = (*probe.Host)(nil)
