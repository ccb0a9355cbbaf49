package probe_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/kubefake"
	"github.com/fleet-role/fleet-role/lab/probetest"
)

// The reading-failures metric's label is one of the readings, never an
// error's text: samples whose errors carry a new text every period (a new
// first word too) add no series after the first period's.
func TestReadingFailuresBounded(t *testing.T) {
	s := probetest.Settings(t, 100*time.Millisecond)
	store := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	var mu sync.Mutex
	seq := 0 // the sample's period, each with texts of its own
	sampler := &probetest.Sampler{Make: func(plan probe.Plan, n int, at time.Time) entry.Sample {
		mu.Lock()
		k := seq
		seq++
		mu.Unlock()
		x := probetest.Fit(plan, n, at)
		x.Errors = []string{fmt.Sprintf("etcd: scrape %d failed", k), fmt.Sprintf("reading%d: %d", k, k), fmt.Sprintf("no-colon-%d", k)}
		return x
	}}
	c := newClocked(s.SamplePeriod)
	loop := c.watch(nodes)
	m := loop.metrics
	p, err := probe.New(c.config(probe.Config{Node: "agent-1", Settings: s, Records: store, Sampler: sampler}, loop))
	if err != nil {
		t.Fatal(err)
	}
	probetest.Go(t, "probe agent-1", p.Run)
	seen := map[string]bool{}
	first := 0
	for period := range 10 {
		c.await(t, time.Minute, func() error {
			if n := loop.ended(); n < period+1 {
				return fmt.Errorf("agent-1 has ended %d periods", n)
			}
			return nil
		})
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fleet_role_probe_reading_failures_total" {
				continue
			}
			for _, x := range mf.GetMetric() {
				for _, l := range x.GetLabel() {
					seen[l.GetName()+"="+l.GetValue()] = true
				}
			}
		}
		if period == 0 {
			first = len(seen)
			if !seen["reading=etcd"] || !seen["reading=other"] {
				t.Fatalf("the first period's series: %v, want reading=etcd and reading=other", seen)
			}
		} else if len(seen) != first {
			t.Fatalf("period %d: label values %v, %d after the first period", period, seen, first)
		}
	}
}
