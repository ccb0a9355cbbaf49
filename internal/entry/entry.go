// Package entry holds the probe's per-host entry: the last window of samples
// one host has recorded, kept in that host's record (internal/record: a
// ConfigMap named after its node), and its wire format (docs/entry.md).
//
// The logical types here are what the probe fills from its readings and what
// the decision reads. The wire format is columnar JSON, one array per signal
// across the window, so that field names are written once an entry: each
// probe rewrites its whole record every period, so an entry's size is what a
// host's sample costs the etcd it judges (a full window at the worst values
// a real host gives is about 7 KB for a standby, 20 KB for a voter;
// docs/entry.md, "Sizes").
package entry

import (
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Entry is one host's recorded window.
type Entry struct {
	Node    string
	Samples []Sample
	// Fsync is the latest disk reading, taken once per window on non-voters.
	Fsync *FsyncReading
	// Shrunk is how many of the oldest samples the probe dropped at its
	// last write so that the record fits its cap (0: none). A record that
	// must shrink is full.
	Shrunk int
	// Refused is the API server's refusal of the probe's last full write,
	// when the probe could write only this much: the window it holds is
	// then not what the record shows.
	Refused string
	// Withheld is why the probe writes no samples: the API server did not
	// refuse it a write that the admission policy must refuse (a record not
	// its own), so records are not protected and it fails closed. The
	// record then holds no samples.
	Withheld string
}

// Link classes of the interface the default route leaves by.
const (
	ClassWired   = "wired"
	ClassWifi    = "wifi"
	ClassUnknown = "unknown"
)

// Link is the interface the default route leaves by and its class.
type Link struct {
	Interface string
	Class     string
}

// Connect is one TCP connect to a voter's peer port.
type Connect struct {
	Seconds float64
	// Err is set when the connect failed; Seconds is then not a latency.
	Err string
}

// Sample is what a host recorded in one period. Its readings of one number
// a sample are the format's columns, each described once, in entryColumns
// (columns.go).
type Sample struct {
	At time.Time
	// Restart marks the first sample after a probe (re)start: gained values
	// have no baseline in it.
	Restart bool
	Link    Link
	// Connect maps a voter's node name to the connect to its peer port.
	Connect map[string]Connect
	// MemTotalBytes is 0 when memory could not be read this period.
	MemTotalBytes     uint64
	MemAvailableBytes uint64
	// MemFullStallSeconds is the PSI memory "full" total gained since the
	// previous sample; nil when PSI is absent or there is no baseline.
	MemFullStallSeconds *float64
	// WakeupLateSeconds is the largest lateness of a timer due once a
	// heartbeat interval, of the wake-ups since the previous sample
	// (internal/wakeup): how late a starved host runs its processes.
	// nil when no wake-up came since the previous sample (the first sample
	// after a start) or the reading is not taken.
	WakeupLateSeconds *float64
	// Etcd is set on voters only.
	Etcd *EtcdSample
	// Errors lists the readings that failed this period, "what: error".
	Errors []string
}

// Connects is one voter's connects over an entry's samples, oldest first,
// as the format stores them: At[i] says whether sample i has a connect to
// the voter (timed or failed), Connect[i] what it is. DecodeByVoter gives
// them instead of a map per sample.
type Connects struct {
	At      []bool
	Connect []Connect
}

// Slice is the connects of samples from to the end.
func (c *Connects) Slice(from int) *Connects {
	return &Connects{At: c.At[from:], Connect: c.Connect[from:]}
}

// FillConnects fills each sample's Connect map from the connects by voter
// of the same samples: an entry DecodeByVoter read is then the one
// DecodeLimited reads.
func FillConnects(samples []Sample, byVoter map[string]*Connects) {
	for v, c := range byVoter {
		for i := range samples {
			if !c.At[i] {
				continue
			}
			if samples[i].Connect == nil {
				samples[i].Connect = make(map[string]Connect, len(byVoter))
			}
			samples[i].Connect[v] = c.Connect[i]
		}
	}
}

// EtcdSample is what a voter's etcd metrics gained or read in one period.
// Its readings of one number a sample are columns, in etcdColumns.
type EtcdSample struct {
	MemberID                       string
	IsLeader, IsLearner, HasLeader bool
	ConnectedPeers, KnownPeers     int
	LeaderChanges                  uint64 // gained
	WALFsync, BackendCommit        quantile.Histogram
	PeerRTT                        map[string]quantile.Histogram // To member ID -> gained
	DBSizeBytes, QuotaBytes        uint64
	Err                            string // the scrape failed
}

// FsyncReading is one native disk reading.
type FsyncReading struct {
	At           time.Time
	Dir          string
	Filesystem   string
	MeasuredDisk bool
	Writes       int
	P99Seconds   float64
	MaxSeconds   float64
	Err          string
	Skipped      string
}

// Append adds s to e and keeps the last window samples. Histograms of older
// samples whose bucket bounds differ from s's are dropped, since the wire
// format states one set of bounds per entry and such counts could not be
// merged with the new ones anyway (an etcd upgrade that changed its buckets).
func Append(e *Entry, s Sample, window int) {
	if s.Etcd != nil {
		for i := range e.Samples {
			old := e.Samples[i].Etcd
			if old == nil {
				continue
			}
			if !sameBounds(old.WALFsync, s.Etcd.WALFsync) {
				old.WALFsync = quantile.Histogram{}
			}
			if !sameBounds(old.BackendCommit, s.Etcd.BackendCommit) {
				old.BackendCommit = quantile.Histogram{}
			}
			if b, ok := anyBounds(s.Etcd.PeerRTT); ok {
				for id, h := range old.PeerRTT {
					if !sameBounds(h, quantile.Histogram{Bounds: b}) {
						old.PeerRTT[id] = quantile.Histogram{}
					}
				}
			}
		}
	}
	e.Samples = append(e.Samples, s)
	if window > 0 && len(e.Samples) > window {
		e.Samples = slices.Delete(e.Samples, 0, len(e.Samples)-window)
	}
}

// AppendKeepsOlder reports whether Append(e, s, ...) leaves e's samples as
// they are (but for the oldest it drops): whether no older sample holds a
// histogram whose bounds s's changed. A reader that keeps a decoded window
// and appends to a copy of its samples slice (record.Writer) may then share
// the samples' memory.
func AppendKeepsOlder(e *Entry, s Sample) bool {
	if s.Etcd == nil {
		return true
	}
	b, peers := anyBounds(s.Etcd.PeerRTT)
	for i := range e.Samples {
		old := e.Samples[i].Etcd
		if old == nil {
			continue
		}
		if !sameBounds(old.WALFsync, s.Etcd.WALFsync) || !sameBounds(old.BackendCommit, s.Etcd.BackendCommit) {
			return false
		}
		if peers {
			for _, h := range old.PeerRTT {
				if !sameBounds(h, quantile.Histogram{Bounds: b}) {
					return false
				}
			}
		}
	}
	return true
}

// sameBounds reports whether old can live beside h in one entry: either has
// no buckets, or their bounds are equal.
func sameBounds(old, h quantile.Histogram) bool {
	if len(old.Bounds) == 0 && len(old.Counts) == 0 || len(h.Bounds) == 0 && len(h.Counts) == 0 {
		return true
	}
	return slices.Equal(old.Bounds, h.Bounds)
}

func anyBounds(m map[string]quantile.Histogram) ([]float64, bool) {
	for _, h := range m {
		if len(h.Counts) > 0 {
			return h.Bounds, true
		}
	}
	return nil, false
}
