package controller_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// A window shrunk to less than half: the records written at the window
// before are read by it, and judged over their newest samples at the new
// one, until every probe has had entry_unchanged to write again; after
// that, a record still at the old window is over the limits and its host
// unknown. A record written at the new window reads as ever.
func TestShrunkWindowReadsTheRecordsBefore(t *testing.T) {
	s := testkit.Settings(t, 200*time.Millisecond)
	s.Window = 50 // p95
	voters := []string{"server-1", "server-2", "server-3"}
	nodes, records, mem := inMemory(t, s, voters, "127.0.17.%d")
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(now)
	ctrl, err := controller.New(controller.Config{Settings: s, Store: mem, Records: records, Nodes: nodes, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	write := func(window int) {
		t.Helper()
		for i, n := range voters {
			e := testkit.RealisticEntry(n, voters, i, window, s.SamplePeriod, clk.Now().Add(-time.Duration(window)*s.SamplePeriod))
			raw, err := entry.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := records.Put(ctx, record.Owner{Name: n}, raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(what string, samples int, verdict status.Verdict) {
		t.Helper()
		st, err := ctrl.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range st.Hosts {
			if h.Samples != samples || h.Verdict != verdict {
				t.Errorf("%s: %s has %d samples, %s; want %d, %s", what, h.Name, h.Samples, h.Verdict, samples, verdict)
			}
		}
	}
	write(50)
	read("at window 50", 50, status.Fit)

	smaller := s
	smaller.Window, smaller.TailPercentile = 10, 0.9 // 2 x 10 samples are under the 50 written
	ctrl.SetSettings(smaller, settings.Source{ConfigMap: "fleet-role/fleet-role-settings", ResourceVersion: "2"})
	ctrl.TakeSettings()
	read("window 10, just after the change", 10, status.Fit)
	clk.Step(smaller.StaleAfter().Duration() - time.Millisecond)
	read("window 10, a millisecond short of entry_unchanged", 10, status.Fit)
	clk.Step(time.Millisecond)
	read("window 10, entry_unchanged after the change, the records still at 50", 0, status.Unknown)
	write(10)
	read("window 10, the records written again", 10, status.Fit)
}
