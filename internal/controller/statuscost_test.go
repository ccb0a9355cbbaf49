package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// countingStore counts the status writes and their bytes: what each costs
// the etcd it judges is about the document's size (docs/performance.md,
// The status's own cost).
type countingStore struct {
	kube.ConfigMaps
	writes, bytes int
}

func (s *countingStore) PatchKey(ctx context.Context, name, key string, value *string) error {
	if value != nil {
		s.writes++
		s.bytes += len(*value)
	}
	return s.ConfigMaps.PatchKey(ctx, name, key, value)
}

// statusCost runs the controller's decisions, two a period as Run makes
// them, over periods periods of a fleet of three voters and standbys
// standbys. With live, each probe writes its record every period, its
// window gaining a sample and losing its oldest, as a probe's does; else
// the records are written once and never change, so that between
// decisions nothing changes but ages (periods must then stay under
// entry_unchanged, past which the hosts are stale). It returns the status
// writes and their bytes.
func statusCost(t testing.TB, standbys, periods int, live bool) (writes, bytes int) {
	t.Helper()
	cfg, now := largeFleet(t, standbys)
	s := cfg.Settings
	clk := clocktesting.NewFakeClock(now)
	cfg.Clock = clk
	store := &countingStore{ConfigMaps: cfg.Store}
	cfg.Store = store
	records := cfg.Records.(*kubefake.Records)
	voters := []string{"voter-0", "voter-1", "voter-2"}
	// Every host's samples for the whole run, generated once: its window
	// at period k is samples k to k+window, the newest at the period's
	// start. largeFleet's records are those of period 0.
	type host struct {
		name string
		e    entry.Entry
	}
	var hosts []host
	t0 := now.Add(-time.Duration(s.Window) * s.SamplePeriod)
	for i := range len(voters) + standbys {
		name, self := fmt.Sprintf("standby-%04d.fleet.example.internal", i-len(voters)), -1
		if i < len(voters) {
			name, self = voters[i], i
		}
		if live {
			hosts = append(hosts, host{name, testkit.RealisticEntry(name, voters, self, s.Window+periods, s.SamplePeriod, t0)})
		}
	}
	c, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for k := range periods {
		for _, h := range hosts {
			e := h.e
			// Its disk reading, taken once a window, stays the one of
			// the window's start: periods stays under a window here.
			e.Samples = e.Samples[k : k+s.Window]
			text, err := entry.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := records.Put(ctx, record.Owner{Name: h.name}, text); err != nil {
				t.Fatal(err)
			}
		}
		for range controller.DecisionsPerPeriod {
			if _, err := c.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Step(s.SamplePeriod / controller.DecisionsPerPeriod)
		}
	}
	return store.writes, store.bytes
}

// The status is written when its decision changes, once a window, and when
// what it says changes (a figure, or when a host was last observed), at
// most once a period; never for ages alone. Records that do not change for
// two periods (under entry_unchanged, three) get one write, the first;
// probes that each add a sample a period get one write a period: a new
// sample moves each host's observation, which the status says.
func TestStatusWrittenOnlyWhenItChanges(t *testing.T) {
	cfg, _ := largeFleet(t, 2)
	stale := cfg.Settings.StaleAfter()
	frozen := int(stale.Value/cfg.Settings.SamplePeriod.Seconds()) - 1
	writes, _ := statusCost(t, 2, frozen, false)
	if writes != 1 {
		t.Errorf("%d status writes over %d periods of ages alone changing, want 1 (the first; %s %v s)", writes, frozen, stale.Name, stale.Value)
	}
	const periods = 20
	writes, bytes := statusCost(t, 2, periods, true)
	if writes > periods || writes < periods/2 {
		t.Errorf("%d status writes over %d periods of probes adding a sample each, want at most one a period, and at least one every other", writes, periods)
	}
	t.Logf("5 hosts, a new sample a period: %d writes in %d periods, %d bytes each", writes, periods, bytes/max(writes, 1))
}

// BenchmarkStatusCost is the status's own cost at 5, 50 and 500 hosts, for
// docs/performance.md: its writes an hour at the shipped period and the
// bytes of each, with every probe adding a sample a period, as a live
// fleet's do (ten periods, scaled to the hour). An op is the whole run.
func BenchmarkStatusCost(b *testing.B) {
	for _, hosts := range []int{5, 50, 500} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			cfg, _ := largeFleet(b, 2)
			hour := float64(time.Hour / cfg.Settings.SamplePeriod)
			const periods = 10
			var writes, bytes int
			for b.Loop() {
				writes, bytes = statusCost(b, hosts-3, periods, true)
			}
			b.ReportMetric(float64(writes)*hour/periods, "writes/hour")
			b.ReportMetric(float64(bytes)/float64(max(writes, 1)), "bytes/write")
		})
		// Ages alone changing: the records written once and unchanged
		// for as many periods as stay under entry_unchanged, past which
		// the hosts are stale (a change the status says). Every write
		// after the first would be one for ages alone.
		b.Run(fmt.Sprintf("ages-only/hosts=%d", hosts), func(b *testing.B) {
			cfg, _ := largeFleet(b, 2)
			stale := cfg.Settings.StaleAfter()
			frozen := int(stale.Value/cfg.Settings.SamplePeriod.Seconds()) - 1
			var writes int
			for b.Loop() {
				writes, _ = statusCost(b, hosts-3, frozen, false)
			}
			b.ReportMetric(float64(writes-1), "writes-after-first")
			b.ReportMetric(float64(frozen*controller.DecisionsPerPeriod), "decisions")
		})
	}
}
