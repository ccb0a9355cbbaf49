package probe

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// Peer is a voter this host connects to each sample.
type Peer struct {
	Node    string
	Address string // host:port of its etcd peer listener
}

// Plan is what one sample must take, decided from the Nodes.
type Plan struct {
	Voter bool   // this host is a voter: read the local etcd member
	Peers []Peer // the other voters, whose peer ports this host connects to
	Fsync bool   // take the disk reading in this sample (non-voters, once a window)
}

// Sampler takes one sample of this host. Host implements it on the real host;
// tests may use their own.
type Sampler interface {
	// Sample takes one sample, and says which of its readings failed; the
	// sample is always returned. The loop writes each failure into the
	// sample's Errors (Failure.Text) and counts it by its Reading.
	Sample(ctx context.Context, plan Plan) (entry.Sample, []Failure)
	// Fsync takes the disk reading, which lasts seconds, so the loop runs
	// it beside the periodic samples. It must return soon after ctx is
	// done, having removed what it wrote: Run waits for it on stop.
	Fsync(ctx context.Context) entry.FsyncReading
}

// StaleRemover is a Sampler whose disk reading leaves a file behind when the
// process is killed mid-reading (SIGKILL, a node's power). Run calls
// RemoveStale once as it starts, before any reading of its own; Host
// implements it.
type StaleRemover interface {
	RemoveStale() (removed []string, err error)
}

// Config is everything the loop needs.
type Config struct {
	Node     string
	Settings settings.Settings
	// Records is where the probe keeps its node's record.
	Records kube.Records
	// Policy asks the API server whether it refuses this probe a write to
	// a record not its own; the probe writes samples only while it does
	// (policy.go). Nil where there is no API server (an in-memory store).
	Policy  kube.PolicyCheck
	Nodes   kube.Nodes
	Sampler Sampler
	Log     *slog.Logger
	Metrics *Metrics // optional
	// FlushTimeout bounds the last write made after the context is
	// cancelled (the pod's termination grace period is the outer bound).
	FlushTimeout time.Duration
	// Clock is what the loop reads time from: its periods and how long
	// ago it took a disk reading. Nil is the real clock; tests step a fake
	// one. The readings' own timeouts stay real: they bound real I/O.
	Clock clock.WithTicker
}

func (c *Config) validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("node name is empty: set NODE_NAME (the downward API's spec.nodeName) or --node"))
	}
	if c.Records == nil || c.Nodes == nil || c.Sampler == nil {
		errs = append(errs, errors.New("probe needs a record store, a node lister and a sampler"))
	}
	return errors.Join(errs...)
}

// Prober holds the state of one probe: its window, what its record holds,
// and what it knows of the admission policy.
type Prober struct {
	cfg Config
	log *slog.Logger

	// mu guards what the loop shares with the disk reading's goroutine
	// (the entry, the reading's own state) and with Ready (the policy).
	mu      sync.Mutex
	entry   entry.Entry
	restart bool // the next sample is the first since this start
	// changes counts changes to entry; the record's window holds the count
	// it was written at (rec). A count rather than a flag, so that a disk
	// reading that lands while a write is in flight is not marked written
	// with it.
	changes uint64
	rec     recordState // what the node's record holds (record.go)
	pol     policy      // what the probe knows of the admission policy (policy.go)

	// writer is closed when the writes beside the loop have ended; nil
	// while none runs (writeBeside).
	writer chan struct{}

	fsyncRunning bool
	fsyncDone    chan struct{} // closed when the last reading started has returned
	// lastFsync is when this process last started a reading, and started
	// when it started, both by the loop's clock (the real one's readings
	// carry the monotonic clock). A reading's age is never taken from a
	// stamp in the entry, which another clock (or anyone who can write the
	// ConfigMap) set.
	lastFsync, started time.Time

	owner record.Owner // this node, the owner of its record: set by the loop, read by the writes beside it

	// The loop's alone.
	recording bool          // this node records (a voter or marked eligible), or had a record at start
	lastNodes []corev1.Node // the last list that succeeded

	// pending is a change of the settings handed over by SetSettings,
	// taken at the next period boundary (live.go).
	pendingMu sync.Mutex
	pending   *settings.Settings
}

// New checks the configuration and returns a probe ready to Run.
func New(cfg Config) (*Prober, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Prober{
		cfg:     cfg,
		log:     cfg.Log.With("node", cfg.Node),
		entry:   entry.Entry{Node: cfg.Node},
		restart: true,
		started: cfg.Clock.Now(),
	}, nil
}

// Run samples every period until ctx is cancelled, then writes what it holds
// and returns nil. It returns an error only when it cannot start.
func (p *Prober) Run(ctx context.Context) error {
	p.takeSettings(ctx, nil)
	period := p.cfg.Settings.SamplePeriod
	p.log.Info("probe started", "period", period, "window", p.cfg.Settings.Window)
	p.removeStaleFsync()
	stopBeside := p.startBeside(ctx)
	defer func() { stopBeside() }()
	ticker := p.cfg.Clock.NewTicker(period)
	defer func() { ticker.Stop() }()
	for done := false; !done; {
		p.tick(ctx)
		select {
		case <-ctx.Done():
			done = true
		case <-ticker.C():
			// A change of the settings is taken here, between two
			// samples: the next is the first by the new figures, and a
			// new period starts its ticker from now.
			if p.takeSettings(ctx, &stopBeside) {
				ticker.Stop()
				ticker = p.cfg.Clock.NewTicker(p.cfg.Settings.SamplePeriod)
			}
		}
	}
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.FlushTimeout)
	p.flush(flushCtx)
	p.waitFsync(flushCtx)
	cancel()
	p.mu.Lock()
	held, unwritten, holds := len(p.entry.Samples), p.windowDue(), p.rec.holds
	p.mu.Unlock()
	p.log.Info("probe stopped", "samples", held, "unwritten", unwritten, "record", holds.String())
	return nil
}

// tick is one period: read the Nodes, take a sample when this node records,
// and write the window.
func (p *Prober) tick(ctx context.Context) {
	if ctx.Err() != nil {
		// When a tick and the cancellation are both ready, Run's select
		// picks either; a tick on a cancelled context would only fail.
		return
	}
	start := p.cfg.Clock.Now()
	defer func() { p.cfg.Metrics.observeTick(p.cfg.Clock.Since(start)) }()

	next := start.Add(p.cfg.Settings.SamplePeriod) // the next period's tick
	p.resume(ctx)
	nodes, err := p.cfg.Nodes.List(ctx)
	switch {
	case err == nil:
		p.lastNodes = nodes
	case p.lastNodes == nil:
		// Without the Nodes the probe cannot tell whom to measure; it
		// still tries to deliver the samples it holds.
		p.log.Warn("list nodes failed; no sample this period", "err", err)
		p.cfg.Metrics.readingFailed(ReadingNodes)
		p.writeBeside(ctx, next)
		return
	default:
		// The API server is away; the hosts are not, and an outage is
		// when their readings matter most. Sample as the Nodes were
		// last read: they change far more rarely than the API fails.
		p.log.Warn("list nodes failed; sampling with the Nodes last read", "err", err)
		p.cfg.Metrics.readingFailed(ReadingNodes)
		nodes = p.lastNodes
	}
	plan, records := p.plan(nodes)
	if !records {
		p.stopRecording(ctx)
		return
	}
	p.recording = true
	// A sample in flight when the probe is told to stop is finished, not
	// cut short: cut short, its connects and scrape would fail for that
	// reason alone and count against the peers. Its readings bound it
	// (ReadingTimeout, half a period at most); a period bounds it here too.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Settings.SamplePeriod)
	s, failed := p.cfg.Sampler.Sample(sctx, plan)
	cancel()
	for _, f := range failed {
		s.Errors = append(s.Errors, f.Text())
		p.log.Warn("reading failed", "reading", string(f.Reading), "err", f.Err)
		p.cfg.Metrics.readingFailed(f.Reading)
	}
	p.mu.Lock()
	s.Restart = p.restart
	p.restart = false
	entry.Append(&p.entry, s, p.cfg.Settings.Window)
	p.changes++
	p.mu.Unlock()
	p.cfg.Metrics.sampled()
	p.cfg.Metrics.wokeLate(s.WakeupLateSeconds)
	if plan.Fsync {
		p.startFsync(ctx)
	}
	if ctx.Err() == nil { // else Run writes it next, with a context of its own
		p.writeBeside(ctx, next)
	}
}

// plan decides from the Nodes whether this node records and what a sample
// takes. A node that is neither a voter nor marked eligible records nothing,
// so that records exist only for the hosts that decide the control plane.
func (p *Prober) plan(kubeNodes []corev1.Node) (Plan, bool) {
	nodes := kube.NodesFromKube(kubeNodes, p.cfg.Settings)
	var self *k3snode.Node
	var plan Plan
	for i := range nodes {
		n := &nodes[i]
		if n.Name == p.cfg.Node {
			self = n
			continue
		}
		if !n.Voter {
			continue
		}
		if addr := peerAddress(kubeNodes[i], *n, p.cfg.Settings.PeerPort); addr != "" {
			plan.Peers = append(plan.Peers, Peer{Node: n.Name, Address: addr})
		}
	}
	if self == nil || !(self.Voter || self.Eligible) {
		return Plan{}, false
	}
	for _, k := range kubeNodes {
		if k.Name == p.cfg.Node {
			p.mu.Lock()
			p.owner = record.Owner{Name: k.Name, UID: k.UID}
			p.mu.Unlock()
		}
	}
	sort.Slice(plan.Peers, func(i, j int) bool { return plan.Peers[i].Node < plan.Peers[j].Node })
	plan.Voter = self.Voter
	plan.Fsync = !self.Voter && p.fsyncDue()
	return plan, true
}

// PeerAddressAnnotation names, as host:port, where a voter's etcd peer
// listener is reached when that is not the node's address at the peer port:
// a member behind a proxy or a port mapping. k3s never sets it.
const PeerAddressAnnotation = "fleet-role.io/peer-address"

// peerAddress is where this host connects to measure the path to voter n.
func peerAddress(k corev1.Node, n k3snode.Node, port int) string {
	if a := k.Annotations[PeerAddressAnnotation]; a != "" {
		return a
	}
	if n.PeerAddress == "" {
		return ""
	}
	return net.JoinHostPort(n.PeerAddress, strconv.Itoa(port))
}

// fsyncDue says whether a non-voter's disk reading is due: once a window,
// by this process's monotonic clock. A reading resumed from the entry is of
// unknown age (its stamp is another clock's, or anyone's who can write the
// ConfigMap, and may lie in the future): it is replaced one window after
// this start, so that a restarting probe neither repeats the 22 MiB reading
// beside etcd at each start nor keeps an old reading for ever.
func (p *Prober) fsyncDue() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fsyncRunning {
		return false
	}
	every := time.Duration(p.cfg.Settings.Window) * p.cfg.Settings.SamplePeriod
	switch {
	case !p.lastFsync.IsZero():
		return p.cfg.Clock.Since(p.lastFsync) >= every
	case p.entry.Fsync == nil:
		return true
	default:
		return p.cfg.Clock.Since(p.started) >= every
	}
}

// startFsync runs the disk reading beside the samples: it takes seconds
// (22 MiB in 2300-byte synchronous writes) and must not hold a period back.
func (p *Prober) startFsync(ctx context.Context) {
	done := make(chan struct{})
	p.mu.Lock()
	p.fsyncRunning = true
	p.fsyncDone = done
	p.lastFsync = p.cfg.Clock.Now()
	p.mu.Unlock()
	// A reading that outlives a window is worth nothing; bound it. Read
	// here, in the loop, which alone changes the settings (live.go).
	bound := time.Duration(p.cfg.Settings.Window) * p.cfg.Settings.SamplePeriod
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		r := p.cfg.Sampler.Fsync(rctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.fsyncRunning = false
		if ctx.Err() != nil {
			// The probe is stopping: the reading failed for that alone,
			// and the last one taken stays in the entry.
			return
		}
		if r.Err != "" {
			p.log.Warn("disk reading failed", "dir", r.Dir, "err", r.Err)
			p.cfg.Metrics.readingFailed(ReadingFsync)
		}
		p.entry.Fsync = &r
		p.changes++
	}()
}

// waitFsync waits for a disk reading in flight, which the stop has told to
// end at its next write, so that it removes its file (22 MiB beside etcd's
// data) before the process exits. It waits no longer than ctx, the flush's
// bound: a disk that holds one fdatasync longer leaves the file to
// removeStaleFsync at the next start.
func (p *Prober) waitFsync(ctx context.Context) {
	p.mu.Lock()
	done := p.fsyncDone
	p.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		p.log.Warn("disk reading still running at exit; its file is removed at the next start", "waited", p.cfg.FlushTimeout)
	}
}

// removeStaleFsync removes what a reading killed with an earlier process
// left behind.
func (p *Prober) removeStaleFsync() {
	r, ok := p.cfg.Sampler.(StaleRemover)
	if !ok {
		return
	}
	removed, err := r.RemoveStale()
	for _, f := range removed {
		p.log.Info("removed a disk reading's file left by an earlier start", "file", f)
	}
	if err != nil {
		p.log.Warn("remove disk readings' files left by an earlier start", "err", err)
	}
}

// resume reads the record written before this start, once, so that a
// restarted probe keeps its window. Until that read succeeds the probe does
// not write, lest a short new window replace a full old one.
func (p *Prober) resume(ctx context.Context) {
	p.mu.Lock()
	unread := p.rec.holds == holdsUnread
	p.mu.Unlock()
	if !unread {
		return
	}
	// A write beside the loop may be in flight (a marker its policy check
	// wrote among them): what the read finds must include it.
	p.settle(ctx)
	raw, err := p.cfg.Records.Get(ctx, p.cfg.Node)
	if errors.Is(err, kube.ErrNotFound) {
		p.mu.Lock()
		p.rec = recordState{holds: holdsNothing}
		p.mu.Unlock()
		return
	}
	if err != nil {
		p.log.Warn("read own record failed; will try again next period", "err", err)
		p.cfg.Metrics.readingFailed(ReadingOwnRecord)
		return
	}
	p.recording = true
	old, err := entry.DecodeLimited(raw, entry.LimitsFor(p.cfg.Settings.Window, p.cfg.Settings.MaxServers))
	if err != nil {
		// A malformed record is replaced by a fresh window; the controller
		// reports the host unknown meanwhile.
		p.log.Warn("own record unreadable; starting a new window", "err", err)
		p.mu.Lock()
		p.rec = recordState{holds: holdsForeign}
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case old.Refused != "":
		p.rec = recordState{holds: holdsRefused}
	case old.Withheld != "":
		p.rec = recordState{holds: holdsWithheld}
	default:
		p.rec = recordState{holds: holdsWindow, changes: p.changes}
	}
	fresh := p.entry.Samples
	p.entry = old
	p.entry.Node = p.cfg.Node
	p.entry.Shrunk, p.entry.Refused, p.entry.Withheld = 0, "", ""
	for _, s := range fresh {
		entry.Append(&p.entry, s, p.cfg.Settings.Window)
	}
	if len(fresh) > 0 {
		// The record holds the old window without them.
		p.changes++
	}
	p.log.Info("resumed window", "samples", len(p.entry.Samples))
}

// Reading names a reading of the probe's, as the reading-failures metric's
// label: one of a fixed few, never an error's text, so that the metric's
// series stay as many as the readings.
type Reading string

// The readings a sample takes, and those the loop takes itself.
const (
	ReadingLink      Reading = "link"
	ReadingMemory    Reading = "memory"
	ReadingEtcd      Reading = "etcd"
	ReadingFsync     Reading = "fsync"
	ReadingNodes     Reading = "nodes"
	ReadingOwnRecord Reading = "own-record"
)

// Failure is a reading a sample could not take, and why.
type Failure struct {
	Reading Reading
	Err     error
}

// Text is the failure as the sample's Errors carry it on the wire
// ("etcd: ..."; docs/entry.md).
func (f Failure) Text() string { return string(f.Reading) + ": " + f.Err.Error() }

// Window returns a copy of the samples held, for tests and the demo.
func (p *Prober) Window() entry.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entry
	e.Samples = append([]entry.Sample(nil), p.entry.Samples...)
	return e
}
