package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// Deciding DecisionsPerPeriod times a period, the controller writes a change
// of figures alone at most once a period, and a changed verdict at once.
// Ticks half a period apart on the test's clock; server-1's record gains a
// sample before every tick, so every document differs from the last: written
// at ticks 0, 2 and 4; at tick 5 agent-1's record turns unreadable (its
// verdict unknown): written at once, then at 7 and 9 again. The status
// ConfigMap and the records are in memory: what is under test is the
// controller's choice to write, which TestWritesOnlyOnChange holds against
// the real API server at one tick a period.
func TestWritesAtMostOncePerPeriod(t *testing.T) {
	if controller.DecisionsPerPeriod != 2 {
		t.Fatalf("DecisionsPerPeriod %d: the ticks below are for 2", controller.DecisionsPerPeriod)
	}
	s := testkit.Settings(t, 200*time.Millisecond)
	voters := []string{"server-1", "server-2", "server-3"}
	nodes := &kubefake.Nodes{}
	var objs []corev1.Node
	for i, v := range voters {
		objs = append(objs, *testkit.Node{Name: v, Voter: true, Eligible: true, Address: fmt.Sprintf("127.0.8.%d", i+1)}.Object())
	}
	objs = append(objs, *testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.8.9"}.Object())
	nodes.Set(objs...)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	records := kubefake.NewRecords(s.RecordsNamespace())
	put := func(n string, self int, until time.Time) {
		t.Helper()
		text, err := entry.Encode(testkit.RealisticEntry(n, voters, self, s.Window, s.SamplePeriod, until))
		if err != nil {
			t.Fatal(err)
		}
		if err := records.Put(ctx, record.Owner{Name: n}, text); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range append(slices.Clone(voters), "agent-1") {
		self := i
		if n == "agent-1" {
			self = -1
		}
		put(n, self, t0)
	}
	mem := kubefake.NewConfigMaps()
	if err := mem.Create(s.StatusConfigMap, nil); err != nil {
		t.Fatal(err)
	}
	store := &kubefake.CountingConfigMaps{Inner: mem}
	clk := clocktesting.NewFakeClock(t0)
	ctrl, err := controller.New(controller.Config{Settings: s, Store: store, Records: records, Nodes: nodes, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	tick := s.SamplePeriod / controller.DecisionsPerPeriod
	var wrote []int
	for i := range 10 {
		put("server-1", 0, clk.Now())
		if i == 5 {
			if err := records.Put(ctx, record.Owner{Name: "agent-1"}, "{not an entry"); err != nil {
				t.Fatal(err)
			}
		}
		_, before, _ := store.Counts()
		st, err := ctrl.Tick(ctx)
		if err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
		if _, after, _ := store.Counts(); after > before {
			wrote = append(wrote, i)
		}
		if i == 5 {
			if v := statusHost(st, "agent-1").Verdict; v != "unknown" {
				t.Fatalf("tick 5: agent-1 %s, want unknown", v)
			}
		}
		clk.Step(tick)
	}
	if want := []int{0, 2, 4, 5, 7, 9}; !slices.Equal(wrote, want) {
		t.Errorf("wrote at ticks %v, want %v", wrote, want)
	}
}
