package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// countedPolicy is a PolicyCheck that always finds the policy in force and
// counts its checks, each with the period it came in. A fake: what is
// tested is when the probe asks, not what the API server answers (the
// policy tests on the real API server hold that).
type countedPolicy struct {
	mu     sync.Mutex
	loop   *testkit.Periods
	checks []int // the period (begun count) of each check
}

func (c *countedPolicy) CheckRefused(ctx context.Context, owner record.Owner) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, c.loop.Begun())
	return nil
}

func (c *countedPolicy) at() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.checks...)
}

// With the policy in force the probe checks it at its first period and
// then once every entry_unchanged by its own clock: on a fake clock, the
// second check comes at the first period that is entry_unchanged after
// the first, not a period before, and the third as long after.
func TestPolicyCheckedOnTheProbesClock(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	every := int((s.StaleAfter().Duration() + s.SamplePeriod - 1) / s.SamplePeriod)
	if every < 2 {
		t.Fatalf("entry_unchanged %v is under two periods of %v: the test needs a gap", s.StaleAfter().Duration(), s.SamplePeriod)
	}
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	c := testkit.NewClocked(s.SamplePeriod)
	loop := c.Watch(nodes)
	pol := &countedPolicy{loop: loop}
	p, err := probe.New(c.Config(probe.Config{Node: "agent-1", Settings: s, Records: kubefake.NewRecords(s.RecordsNamespace()),
		Policy: pol, Sampler: &testkit.Sampler{}}, loop))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Go(t, "probe agent-1", p.Run)
	c.Await(t, time.Minute, func() error {
		if n := len(pol.at()); n < 3 {
			return fmt.Errorf("%d checks of the policy so far, at periods %v", n, pol.at())
		}
		return nil
	})
	got := pol.at()
	if got[1]-got[0] != every || got[2]-got[1] != every {
		t.Errorf("checks at periods %v, want one every %d periods (entry_unchanged %v at a %v period)", got[:3], every, s.StaleAfter().Duration(), s.SamplePeriod)
	}
	t.Logf("checks at periods %v: one every %d periods of the fake clock", got, every)
}
