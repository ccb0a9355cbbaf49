package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/internal/link"
	"github.com/fleet-role/fleet-role/internal/memory"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/wakeup"
)

// Host takes samples of the host it runs on with the real readings. It keeps
// the previous etcd scrape and PSI total, since a sample records what was
// gained since the last one.
type Host struct {
	HostRoot   string // where the host's /proc and /sys are: "/" or the DaemonSet's "/host"
	MetricsURL string // the local etcd member's metrics page (k3s: http://127.0.0.1:2381/metrics)
	FsyncDir   string // a directory on the disk etcd would use
	// FsyncSkipReason, when set, replaces the disk reading by a note of why.
	FsyncSkipReason string
	// ConnectTimeout and ScrapeTimeout bound the connects and the scrape;
	// both run at once, so a sample takes at most the longer.
	ConnectTimeout, ScrapeTimeout time.Duration
	Dial                          connect.DialFunc // nil: a plain dialer
	HTTP                          *http.Client     // nil: a client of its own
	Now                           func() time.Time // nil: time.Now
	// Wakeup times a timer due once a heartbeat interval, beside the
	// samples (StartBeside runs it); each sample records the largest
	// lateness since the previous one. nil: no wake-up reading.
	Wakeup *wakeup.Meter

	prevScrape *etcdmetrics.Snapshot
	prevFullUs *uint64
}

func (h *Host) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return clock.RealClock{}.Now()
}

// Sample takes one sample, and the readings that failed in it; the sample
// is always returned.
func (h *Host) Sample(ctx context.Context, plan Plan) (entry.Sample, []Failure) {
	s := entry.Sample{At: h.now().UTC()}
	var (
		failed   []Failure
		wg       sync.WaitGroup
		connects map[string]entry.Connect
		etcd     *entry.EtcdSample
		etcdErr  error
	)
	// The connects and the scrape wait on the network; they run at once so
	// that a slow peer and a paused member do not add up in one period.
	wg.Add(1)
	go func() {
		defer wg.Done()
		connects = h.connect(ctx, plan.Peers)
	}()
	if plan.Voter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			etcd, etcdErr = h.etcd(ctx)
		}()
	}
	if err := h.link(&s); err != nil {
		failed = append(failed, Failure{Reading: ReadingLink, Err: err})
	}
	if err := h.memory(&s); err != nil {
		failed = append(failed, Failure{Reading: ReadingMemory, Err: err})
	}
	h.wakeup(&s)
	wg.Wait()
	s.Connect = connects
	if plan.Voter {
		s.Etcd = etcd
		if etcdErr != nil {
			failed = append(failed, Failure{Reading: ReadingEtcd, Err: etcdErr})
		}
	}
	return s, failed
}

// link reads the default route's link into s; an error is the reading's
// failure.
func (h *Host) link(s *entry.Sample) error {
	r, err := link.Read(h.HostRoot)
	switch {
	case errors.Is(err, link.ErrNoDefaultRoute):
		// No default route is a fact about the host, not a failed reading:
		// there is no link to hold against it.
		s.Link = entry.Link{Class: entry.ClassUnknown}
	case err != nil:
		s.Link = entry.Link{Class: entry.ClassUnknown}
		return err
	default:
		s.Link = entry.Link{Interface: r.Interface, Class: string(r.Class)}
	}
	return nil
}

// memory reads the memory figures into s; an error is the reading's
// failure.
func (h *Host) memory(s *entry.Sample) error {
	r, err := memory.Read(h.HostRoot)
	if err != nil {
		h.prevFullUs = nil
		return err
	}
	s.MemTotalBytes = r.MemTotalBytes
	s.MemAvailableBytes = r.MemAvailableBytes
	if r.PSI == nil {
		h.prevFullUs = nil
		return nil
	}
	cur := r.PSI.Full.TotalUs
	if h.prevFullUs != nil {
		gained := cur
		if cur >= *h.prevFullUs {
			gained = cur - *h.prevFullUs
		} // else the counter restarted (a reboot): it counts from zero
		sec := float64(gained) / 1e6
		s.MemFullStallSeconds = &sec
	}
	h.prevFullUs = &cur
	return nil
}

// wakeup records the largest lateness of the wake-up timer since the
// previous sample. None when no wake-up came since (the first sample
// after a start) or the timer does not run: the reading has no failure of
// its own, only readings not taken.
func (h *Host) wakeup(s *entry.Sample) {
	if h.Wakeup == nil {
		return
	}
	if r, ok := h.Wakeup.Take(); ok {
		sec := r.Late.Seconds()
		s.WakeupLateSeconds = &sec
	}
}

// StartBeside starts the wake-up timer, which runs beside the samples
// rather than in one; stop ends it and waits for it. Run calls it.
func (h *Host) StartBeside(ctx context.Context) (stop func()) {
	if h.Wakeup == nil {
		return func() {}
	}
	h.Wakeup.Start(ctx)
	return h.Wakeup.Stop
}

func (h *Host) connect(ctx context.Context, peers []Peer) map[string]entry.Connect {
	if len(peers) == 0 {
		return nil
	}
	addrs := make([]string, len(peers))
	for i, p := range peers {
		addrs[i] = p.Address
	}
	results := connect.MeasureWith(ctx, h.Dial, addrs, h.ConnectTimeout)
	out := make(map[string]entry.Connect, len(peers))
	for i, r := range results {
		c := entry.Connect{Seconds: r.Seconds}
		if !r.OK {
			c = entry.Connect{Err: r.Err}
		}
		out[peers[i].Node] = c
	}
	return out
}

// etcd scrapes the local member and records what it gained since the last
// scrape. The first scrape after a start has no baseline: it records the
// gauges and no gains, since counts from the member's start would put hours
// of history into one sample.
func (h *Host) etcd(ctx context.Context) (*entry.EtcdSample, error) {
	ctx, cancel := context.WithTimeout(ctx, h.ScrapeTimeout)
	defer cancel()
	snap, err := etcdmetrics.Scrape(ctx, h.HTTP, h.MetricsURL)
	if err != nil {
		// Keep the older baseline: the next gain then covers two periods,
		// which is still what the member did.
		return &entry.EtcdSample{Err: err.Error()}, err
	}
	g := etcdmetrics.Gained(h.prevScrape, snap)
	noBaseline := h.prevScrape == nil
	h.prevScrape = snap
	e := &entry.EtcdSample{
		MemberID:       g.MemberID,
		IsLeader:       g.IsLeader,
		IsLearner:      g.IsLearner,
		HasLeader:      g.HasLeader,
		ConnectedPeers: g.ConnectedPeers,
		KnownPeers:     g.KnownPeers,
		DBSizeBytes:    nonNegative(g.DBSizeBytes),
		QuotaBytes:     nonNegative(g.QuotaBytes),
	}
	if noBaseline {
		return e, nil
	}
	e.LeaderChanges = g.LeaderChanges
	e.WALFsync = g.WALFsync.Histogram
	e.BackendCommit = g.BackendCommit.Histogram
	ids := make([]string, 0, len(g.PeerRTT))
	for id := range g.PeerRTT {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		gain := g.PeerRTT[id]
		if gain.Count == 0 {
			continue // etcd fed it nothing this period, which is usual
		}
		if e.PeerRTT == nil {
			e.PeerRTT = map[string]quantile.Histogram{}
		}
		e.PeerRTT[id] = gain.Histogram
	}
	return e, nil
}

func nonNegative(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// Fsync takes the disk reading, or records why it is skipped.
func (h *Host) Fsync(ctx context.Context) entry.FsyncReading {
	r := entry.FsyncReading{At: h.now().UTC(), Dir: h.FsyncDir}
	if h.FsyncSkipReason != "" {
		r.Skipped = h.FsyncSkipReason
		return r
	}
	got, err := fsync.Measure(ctx, fsync.Options{Dir: h.FsyncDir})
	if err != nil {
		r.Err = fmt.Sprintf("fsync reading in %s: %v", h.FsyncDir, err)
		return r
	}
	r.Filesystem = got.Filesystem
	r.MeasuredDisk = got.MeasuredDisk
	r.Writes = got.Writes
	r.P99Seconds = got.P99Seconds
	r.MaxSeconds = got.MaxSeconds
	return r
}

// RemoveStale removes the files of disk readings killed with an earlier
// process from FsyncDir (fsync.RemoveStale: only a reading's own unlocked
// files). A directory that does not exist holds none.
func (h *Host) RemoveStale() ([]string, error) {
	if h.FsyncDir == "" {
		return nil, nil
	}
	removed, err := fsync.RemoveStale(h.FsyncDir)
	if errors.Is(err, fs.ErrNotExist) && len(removed) == 0 {
		return nil, nil
	}
	return removed, err
}

// NewHost is the sampler of the host the probe runs on, with its timeouts
// derived from the settings.
func NewHost(s settings.Settings, hostRoot, metricsURL, fsyncDir string) *Host {
	return &Host{
		HostRoot:        hostRoot,
		MetricsURL:      metricsURL,
		FsyncDir:        fsyncDir,
		FsyncSkipReason: s.FsyncSkipReason,
		ConnectTimeout:  ReadingTimeout(s),
		ScrapeTimeout:   ReadingTimeout(s),
		// etcd's raft loop ticks once a heartbeat interval: the timer is
		// due as often as etcd's ticker (docs/limits.md, wakeup_late).
		Wakeup: wakeup.New(s.HeartbeatInterval),
	}
}

// ReadingTimeout bounds a connect and a scrape: the election timeout, since a
// peer that takes longer than that to answer is as good as gone to etcd (and
// a connect over the limit counts the same as a failed one), but never more
// than half a period, so that a sample ends well inside its period.
func ReadingTimeout(s settings.Settings) time.Duration {
	t := s.ElectionTimeout
	if half := s.SamplePeriod / 2; half > 0 && half < t {
		t = half
	}
	return t
}
