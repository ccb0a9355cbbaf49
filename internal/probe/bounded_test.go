package probe_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The reading-failures metric's label is the failed reading's name, one of
// a fixed few, never an error's text: failures whose errors carry a new
// text every period add no series after the first period's. The texts go
// to the sample's Errors, as "reading: error".
func TestReadingFailuresBounded(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	store := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	sampler := &testkit.Sampler{Fail: func(seq int) []probe.Failure {
		return []probe.Failure{
			{Reading: probe.ReadingEtcd, Err: fmt.Errorf("scrape %d failed", seq)},
			{Reading: probe.ReadingLink, Err: fmt.Errorf("reading%d: %d", seq, seq)},
		}
	}}
	c := testkit.NewClocked(s.SamplePeriod)
	loop := c.Watch(nodes)
	m := loop.Metrics
	p, err := probe.New(c.Config(probe.Config{Node: "agent-1", Settings: s, Records: store, Sampler: sampler}, loop))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Go(t, "probe agent-1", p.Run)
	seen := map[string]bool{}
	first := 0
	for period := range 10 {
		c.Await(t, time.Minute, func() error {
			if n := loop.Ended(); n < period+1 {
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
			if len(seen) != 2 || !seen["reading=etcd"] || !seen["reading=link"] {
				t.Fatalf("the first period's series: %v, want reading=etcd and reading=link alone", seen)
			}
		} else if len(seen) != first {
			t.Fatalf("period %d: label values %v, %d after the first period", period, seen, first)
		}
	}
	// The record holds each failure as its text.
	testkit.Eventually(t, time.Minute, func() error {
		e, err := recorded(store, "agent-1")
		if err != nil {
			return err
		}
		if len(e.Samples) < 10 {
			return fmt.Errorf("%d samples written", len(e.Samples))
		}
		taken := sampler.Taken()
		for i, x := range e.Samples {
			var seq int
			if len(x.Errors) == 0 {
				return fmt.Errorf("sample %d has no errors", i)
			}
			if _, err := fmt.Sscanf(x.Errors[0], "etcd: scrape %d failed", &seq); err != nil || seq >= len(taken) {
				return fmt.Errorf("sample %d errors %q: not the first failure's text", i, x.Errors)
			}
			want := []string{fmt.Sprintf("etcd: scrape %d failed", seq), fmt.Sprintf("link: reading%d: %d", seq, seq)}
			if !slices.Equal(x.Errors, want) || !slices.Equal(taken[seq].Errors, want) {
				return fmt.Errorf("sample %d errors %q (the sampler's record of it %q), want %q", i, x.Errors, taken[seq].Errors, want)
			}
		}
		return nil
	})
}
