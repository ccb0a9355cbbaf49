package probe_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// liveSampler records the settings the loop hands it, and its reading
// beside the loop's starts and stops.
type liveSampler struct {
	besideSampler
	tmu   sync.Mutex
	taken []settings.Settings
}

func (l *liveSampler) TakeSettings(s settings.Settings) {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	l.taken = append(l.taken, s)
}

func (l *liveSampler) handed() []settings.Settings {
	l.tmu.Lock()
	defer l.tmu.Unlock()
	return slices.Clone(l.taken)
}

var _ probe.SettingsTaker = (*liveSampler)(nil)

// A change handed to a running probe is taken between two samples: the
// window shrinks at the next write, the samples after it come a new period
// apart (a ticker never fires early, so that holds on a busy machine), the
// sampler is handed the new settings once, and a new heartbeat interval
// restarts the reading beside the loop (the wake-up timer). On the real
// clock: the ticker's period is what is tested.
func TestSettingsTakenBetweenSamples(t *testing.T) {
	s := testkit.Settings(t, 50*time.Millisecond) // window 20 at p95
	store := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	ls := &liveSampler{}
	p, err := probe.New(probe.Config{Node: "agent-1", Settings: s, Records: store, Nodes: nodes, Sampler: ls})
	if err != nil {
		t.Fatal(err)
	}
	loop := testkit.Go(t, "probe agent-1", p.Run)
	defer loop.Stop(t)
	ctx := context.Background()
	held := func() (entry.Entry, error) {
		raw, err := store.Get(ctx, "agent-1")
		if err != nil {
			return entry.Entry{}, err
		}
		return entry.Decode(raw)
	}
	testkit.Eventually(t, time.Minute, func() error {
		e, err := held()
		if err != nil || len(e.Samples) < 15 {
			return fmt.Errorf("the record holds %d samples (%v), want 15", len(e.Samples), err)
		}
		return nil
	})

	next := s
	next.SamplePeriod = 300 * time.Millisecond
	next.TailPercentile, next.Window = 0.9, 10 // the fewest at p90
	next.HeartbeatInterval = 2 * s.HeartbeatInterval
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	before := len(ls.Taken())
	p.SetSettings(next)
	testkit.Eventually(t, time.Minute, func() error {
		if n := len(ls.Taken()) - before; n < 5 {
			return fmt.Errorf("%d samples since the change, want 5", n)
		}
		e, err := held()
		if err != nil || len(e.Samples) > next.Window {
			return fmt.Errorf("the record holds %d samples (%v), want at most the new window, %d", len(e.Samples), err, next.Window)
		}
		return nil
	})
	// The first sample after the change may be the old period's; from the
	// second on the new ticker's, which fire a new period apart, never
	// earlier. Each sample is stamped a little after its tick, by as much
	// as the loop was kept waiting, so the span from the second to the
	// last is their ticks' less at most one wait: allowed half a period.
	after := ls.Taken()[before+1:]
	span := after[len(after)-1].At.Sub(after[0].At)
	if least := time.Duration(len(after)-1)*next.SamplePeriod - next.SamplePeriod/2; span < least {
		t.Errorf("%d samples after the change span %v, under %d new periods of %v less half of one (%v): the old period of %v still ticks",
			len(after), span, len(after)-1, next.SamplePeriod, least, s.SamplePeriod)
	}
	if h := ls.handed(); len(h) != 1 || h[0] != next {
		t.Errorf("the sampler was handed %d settings, want the new ones once", len(h))
	}
	if ev := ls.Events(); !slices.Equal(ev, []string{"start", "stop", "start"}) {
		t.Errorf("the reading beside the loop: %v, want [start stop start] (restarted for the new heartbeat interval)", ev)
	}

	// The same settings handed again change nothing.
	p.SetSettings(next)
	n := len(ls.Taken())
	testkit.Eventually(t, time.Minute, func() error {
		if len(ls.Taken()) < n+2 {
			return fmt.Errorf("%d samples since, want 2", len(ls.Taken())-n)
		}
		return nil
	})
	if len(ls.handed()) != 1 || len(ls.Events()) != 3 {
		t.Errorf("unchanged settings handed again: the sampler was handed %d, the reading beside %v", len(ls.handed()), ls.Events())
	}
}
