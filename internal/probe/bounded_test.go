package probe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/probetest"
)

// The reading-failures metric's label is one of the readings, never an
// error's text: samples whose errors carry a new text every period (a new
// first word too) add no series after the first period's.
func TestReadingFailuresBounded(t *testing.T) {
	s := probetest.Settings(t, 100*time.Millisecond)
	store := kube.NewMemRecords(s.Namespace)
	nodes := &kube.MemNodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	seq := 0
	sampler := &probetest.Sampler{Make: func(plan probe.Plan, n int, at time.Time) entry.Sample {
		x := probetest.Fit(plan, n, at)
		x.Errors = []string{fmt.Sprintf("etcd: scrape %d failed", seq), fmt.Sprintf("reading%d: %d", seq, seq), fmt.Sprintf("no-colon-%d", seq)}
		return x
	}}
	m := probe.NewMetrics()
	p, err := probe.New(probe.Config{Node: "agent-1", Settings: s, Records: store, Nodes: nodes, Sampler: sampler, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	first := 0
	for seq = range 10 {
		p.Tick(context.Background())
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
		if seq == 0 {
			first = len(seen)
			if !seen["reading=etcd"] || !seen["reading=other"] {
				t.Fatalf("the first period's series: %v, want reading=etcd and reading=other", seen)
			}
		} else if len(seen) != first {
			t.Fatalf("period %d: label values %v, %d after the first period", seq, seen, first)
		}
	}
}
