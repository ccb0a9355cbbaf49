package controller_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// largeFleet is three voters and standbys standbys, every one with a Node
// labelled as k3s labels it and a record holding a realistic full window,
// in memory: the controller's inputs at the bench's largest fleet without
// an API server, so that what a decision period allocates and keeps is the
// controller's own.
func largeFleet(t testing.TB, standbys int) (controller.Config, time.Time) {
	s := settings.Defaults()
	s.DryRun = true
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	voters := []string{"voter-0", "voter-1", "voter-2"}
	records := kubefake.NewRecords(s.RecordsNamespace())
	var nodes []corev1.Node
	for i := range len(voters) + standbys {
		name, self := fmt.Sprintf("standby-%04d.fleet.example.internal", i-len(voters)), -1
		if i < len(voters) {
			name, self = voters[i], i
		}
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name, s.EligibleLabel: "true", s.PinnedLabel: "false"}}}
		if self >= 0 {
			n.Labels[k3snode.EtcdRoleLabel] = "true"
			n.Status.Conditions = []corev1.NodeCondition{{Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner"}}
		}
		nodes = append(nodes, n)
		e := testkit.RealisticEntry(name, voters, self, s.Window, s.SamplePeriod, now.Add(-time.Duration(s.Window)*s.SamplePeriod))
		text, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := records.Put(context.Background(), record.Owner{Name: name}, text); err != nil {
			t.Fatal(err)
		}
	}
	mem := &kubefake.Nodes{}
	mem.Set(nodes...)
	store := kubefake.NewConfigMaps()
	if err := store.Create(s.StatusConfigMap, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	return controller.Config{Settings: s, Store: store, Records: records, Nodes: mem, Clock: clocktesting.NewFakeClock(now)}, now
}

// BenchmarkTick is one decision of the controller over the bench's
// largest fleet (500 standbys' records and three voters'), in memory: what
// it allocates, and the heap it keeps between decisions (live-heap-bytes,
// after a collection), which with the allocations of a decision sets its
// peak resident memory.
//
// Each decision is half a period after the last, as Run makes them, so
// that every other one is due to write and encodes the status to learn
// whether it changed (the records do not change here: it is written once a
// window). An op is one decision: a period is two.
func BenchmarkTick(b *testing.B) { benchmarkTick(b, false) }

// BenchmarkTickWithPage is BenchmarkTick with the status page's server
// observing each decision, as the controller command runs: what keeping the
// page's model and a window's history adds to what a decision keeps.
func BenchmarkTickWithPage(b *testing.B) { benchmarkTick(b, true) }

func benchmarkTick(b *testing.B, page bool) {
	cfg, now := largeFleet(b, 500)
	clk := clocktesting.NewFakeClock(now)
	cfg.Clock = clk
	if page {
		cfg.Page = statuspage.NewServer(statuspage.HistoryFor(cfg.Settings, controller.DecisionsPerPeriod), "bench")
	}
	c, err := controller.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clk.Step(cfg.Settings.SamplePeriod / controller.DecisionsPerPeriod)
		if _, err := c.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc), "live-heap-bytes")
	// What the controller keeps is live only while it is: without this the
	// collection above may take it, and the figure would leave it out.
	runtime.KeepAlive(c)
}
