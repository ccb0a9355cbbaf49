package bench

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// gate stops the in-process probes as SIGSTOP stops a process: while it is
// shut, a probe's next reading of the Nodes, sample, disk reading or write of
// its record waits until it opens (or the probe's context ends). What a probe
// had already begun when the gate shut runs on, as an instruction in flight
// would; the probe's ticker drops the ticks it misses and fires once on
// continuing, as Go's ticker does in a stopped process.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newGate() *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default: // already shut
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type gatedSampler struct {
	probe.Sampler
	g *gate
}

func (s gatedSampler) Sample(ctx context.Context, plan probe.Plan) (entry.Sample, []probe.Failure) {
	_ = s.g.wait(ctx) // on ctx done the sampler's own readings fail at once
	return s.Sampler.Sample(ctx, plan)
}

func (s gatedSampler) Fsync(ctx context.Context) entry.FsyncReading {
	_ = s.g.wait(ctx)
	return s.Sampler.Fsync(ctx)
}

type gatedNodes struct {
	kube.Nodes
	g *gate
}

func (n gatedNodes) List(ctx context.Context) ([]corev1.Node, error) {
	if err := n.g.wait(ctx); err != nil {
		return nil, err
	}
	return n.Nodes.List(ctx)
}

type gatedRecords struct {
	kube.Records
	g *gate
}

func (r gatedRecords) Get(ctx context.Context, node string) (string, error) {
	if err := r.g.wait(ctx); err != nil {
		return "", err
	}
	return r.Records.Get(ctx, node)
}

func (r gatedRecords) Put(ctx context.Context, owner record.Owner, entry string) error {
	if err := r.g.wait(ctx); err != nil {
		return err
	}
	return r.Records.Put(ctx, owner, entry)
}

func (r gatedRecords) Delete(ctx context.Context, node string) error {
	if err := r.g.wait(ctx); err != nil {
		return err
	}
	return r.Records.Delete(ctx, node)
}

// fleetStall stops and continues a whole fleet: every etcd member's process
// (SIGSTOP, SIGCONT) and every in-process probe (the gate), or the members
// alone.
type fleetStall struct {
	members     []*etcdproc.Member
	g           *gate
	membersOnly bool
}

func (f fleetStall) String() string {
	if f.membersOnly {
		return "every member (the probes running on)"
	}
	return "every member and probe"
}

// stop stops every member, then shuts the probes' gate unless membersOnly. A member that would
// not stop is an error; those already stopped are continued first.
func (f fleetStall) stop() error {
	for i, m := range f.members {
		if err := m.Pause(); err != nil {
			for _, p := range f.members[:i] {
				_ = p.Resume()
			}
			return err
		}
	}
	if !f.membersOnly {
		f.g.shut()
	}
	return nil
}

// resume continues every member, then opens the gate.
func (f fleetStall) resume() error {
	var first error
	for _, m := range f.members {
		if err := m.Resume(); err != nil && first == nil {
			first = err
		}
	}
	f.g.release()
	return first
}

// RemoveStale passes the probe's start-up clean-up to a sampler that has one.
func (s gatedSampler) RemoveStale() ([]string, error) {
	if r, ok := s.Sampler.(probe.StaleRemover); ok {
		return r.RemoveStale()
	}
	return nil, nil
}
