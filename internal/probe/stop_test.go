package probe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// blockingSampler holds its first sample until released, and records
// whether the context it was given had been cancelled by then.
type blockingSampler struct {
	testkit.Sampler
	started, release chan struct{}
	cancelled        chan bool
}

func (b *blockingSampler) Sample(ctx context.Context, plan probe.Plan) (entry.Sample, []probe.Failure) {
	x, failed := b.Sampler.Sample(ctx, plan)
	if len(b.Taken()) == 2 {
		close(b.started)
		<-b.release
		b.cancelled <- ctx.Err() != nil
	}
	return x, failed
}

// A sample in flight when the probe is told to stop (SIGTERM) is finished
// with its own context, not cut short: cut short, its connects and scrape
// would fail because of the stop alone and count against the peers. It is
// then written with what the probe holds. (In memory: the ordering, not the
// API, is under test.)
func TestStopFinishesTheSampleInFlight(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	store := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	b := &blockingSampler{started: make(chan struct{}), release: make(chan struct{}), cancelled: make(chan bool, 1)}
	clk := testkit.NewClocked(s.SamplePeriod)
	r := testkit.StartProbeWith(t, clk, s, "agent-1", b, store, nodes)
	clk.Await(t, time.Minute, func() error {
		select {
		case <-b.started:
			return nil
		default:
			return errors.New("the second sample has not begun")
		}
	})
	r.Cancel()
	close(b.release)
	if <-b.cancelled {
		t.Error("the sample in flight saw its context cancelled by the stop")
	}
	r.Stop(t)
	raw, err := store.Get(context.Background(), "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := testkit.HoldsExactly(e, b.Taken()); err != nil || len(e.Samples) != 2 {
		t.Errorf("after the stop: %v (%d samples)", err, len(e.Samples))
	}
	if recs := r.Log.Records("probe stopped"); len(recs) != 1 || recs[0]["unwritten"] != false || recs[0]["samples"] != float64(2) {
		t.Errorf("stop logged %v", recs)
	}
}
