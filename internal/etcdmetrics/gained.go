package etcdmetrics

import (
	"math"
	"sort"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// TailQuantile is the percentile the disk and round-trip figures are read
// at: etcd's disk guidance is stated as p99 (docs/facts.md, etcd disks).
const TailQuantile = 0.99

// Gain is what a histogram gained over an interval.
type Gain struct {
	// Count is the number of observations gained.
	Count uint64 `json:"count"`
	// P99Seconds is the TailQuantile of the gained observations as
	// histogram_quantile computes it; null when none were gained.
	P99Seconds *float64 `json:"p99_seconds"`
	// Histogram is the gained buckets (not cumulative, +Inf last): the
	// probe stores these so that the controller can merge them over a
	// window, which a p99 per interval cannot be.
	Histogram quantile.Histogram `json:"-"`
	// SumSeconds is the sum of the gained observations.
	SumSeconds float64 `json:"-"`
}

// Reading is what a member gained between two snapshots, and the gauges of
// the later one.
type Reading struct {
	MemberID  string `json:"member_id"`
	IsLeader  bool   `json:"is_leader"`
	IsLearner bool   `json:"is_learner"`
	HasLeader bool   `json:"has_leader"`
	// ConnectedPeers is the number of distinct peers with
	// etcd_network_active_peers above zero: never the sum, which counts a
	// peer twice on pages that show both streams (docs/facts.md).
	ConnectedPeers int `json:"connected_peers"`
	// KnownPeers is the number of other members this member knows of,
	// connected or not (etcd_network_known_peers above zero, itself
	// excluded): connected_peers below it means a peer it cannot reach.
	KnownPeers    int    `json:"known_peers"`
	LeaderChanges uint64 `json:"leader_changes"`
	WALFsync      Gain   `json:"wal_fsync"`
	BackendCommit Gain   `json:"backend_commit"`
	// PeerRTT is keyed by the peer's member ID (the To label). Every known
	// peer the later page has a series for is present, with count 0 when etcd
	// fed it nothing in the interval, which is common: it is fed about
	// twice every 30 s (docs/facts.md).
	PeerRTT     map[string]Gain `json:"peer_rtt"`
	DBSizeBytes int64           `json:"db_size_bytes"`
	QuotaBytes  int64           `json:"quota_bytes"`
	// IntervalSeconds is the time between the two scrapes; 0 without a
	// baseline.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Restarted is set when the member restarted between the snapshots
	// (its start time changed, or a counter or histogram went down); the
	// gains then count from its start, never negative.
	Restarted bool `json:"restarted"`
	// FromStart is set when the gains count from the member's start: no
	// baseline was given, or it restarted.
	FromStart bool `json:"from_start"`
}

// Gained computes what cur gained over prev. prev nil means no baseline:
// the gains are everything the member counted since it started. A counter or
// histogram lower in cur than in prev means the member restarted; the whole
// interval then counts from zero (cur's values are the gain).
func Gained(prev, cur *Snapshot) Reading {
	r := Reading{
		MemberID:    cur.MemberID,
		IsLeader:    cur.IsLeader,
		IsLearner:   cur.IsLearner,
		HasLeader:   cur.HasLeader,
		KnownPeers:  len(cur.KnownPeers),
		DBSizeBytes: cur.DBSizeBytes,
		QuotaBytes:  cur.QuotaBytes,
		PeerRTT:     map[string]Gain{},
	}
	for _, v := range cur.ActivePeers {
		if v > 0 {
			r.ConnectedPeers++
		}
	}
	base := prev
	if prev != nil && restarted(prev, cur) {
		r.Restarted = true
		base = nil
	}
	if prev != nil && !prev.Time.IsZero() && !cur.Time.IsZero() {
		r.IntervalSeconds = cur.Time.Sub(prev.Time).Seconds()
	}
	r.FromStart = base == nil
	if base == nil {
		base = &Snapshot{}
	}
	r.LeaderChanges = uint64(math.Round(cur.LeaderChanges - base.LeaderChanges))
	r.WALFsync = gain(base.WALFsync, cur.WALFsync)
	r.BackendCommit = gain(base.BackendCommit, cur.BackendCommit)
	known := map[string]bool{}
	for _, id := range cur.KnownPeers {
		known[id] = true
	}
	for to, h := range cur.PeerRTT {
		// A removed member's series stays on the page; it is no peer.
		if len(known) > 0 && !known[to] {
			continue
		}
		r.PeerRTT[to] = gain(base.PeerRTT[to], h)
	}
	return r
}

// restarted reports a member that is not the process it was: a new start
// time, another member ID, or any counter or histogram that went down.
func restarted(prev, cur *Snapshot) bool {
	if prev.ProcessStart != 0 && cur.ProcessStart != 0 && prev.ProcessStart != cur.ProcessStart {
		return true
	}
	if prev.MemberID != "" && cur.MemberID != "" && prev.MemberID != cur.MemberID {
		return true
	}
	if cur.LeaderChanges < prev.LeaderChanges || fell(prev.WALFsync, cur.WALFsync) || fell(prev.BackendCommit, cur.BackendCommit) {
		return true
	}
	for to, h := range prev.PeerRTT {
		if c, ok := cur.PeerRTT[to]; ok && fell(h, c) {
			return true
		}
	}
	return false
}

// fell reports a histogram with fewer observations, or a smaller bucket,
// than before. Different bounds compare as not fallen; gain then counts the
// later histogram from zero.
func fell(prev, cur Cumulative) bool {
	if cur.Count() < prev.Count() {
		return true
	}
	if !sameBounds(prev, cur) {
		return false
	}
	for i := range cur.Counts {
		if cur.Counts[i] < prev.Counts[i] {
			return true
		}
	}
	return false
}

func sameBounds(a, b Cumulative) bool {
	if len(a.Bounds) != len(b.Bounds) || len(a.Counts) != len(b.Counts) {
		return false
	}
	for i := range a.Bounds {
		if a.Bounds[i] != b.Bounds[i] {
			return false
		}
	}
	return true
}

// gain is cur less prev, bucket by bucket, as non-cumulative counts.
func gain(prev, cur Cumulative) Gain {
	if len(cur.Counts) == 0 {
		return Gain{}
	}
	if !sameBounds(prev, cur) || fell(prev, cur) {
		prev = Cumulative{} // a new series, or one that started again
	}
	h := quantile.Histogram{
		Bounds: append([]float64(nil), cur.Bounds...),
		Counts: make([]uint64, len(cur.Counts)),
	}
	var below uint64 // the gained cumulative count of the bucket before
	for i, c := range cur.Counts {
		var p uint64
		if len(prev.Counts) > 0 {
			p = prev.Counts[i]
		}
		d := c - p
		if d < below {
			// Only a page that was not etcd's can gain fewer
			// observations at or below a bound than below the one
			// before; count nothing rather than wrap around.
			continue
		}
		h.Counts[i] = d - below
		below = d
	}
	g := Gain{Count: h.Count(), Histogram: h, SumSeconds: math.Max(0, cur.Sum-prev.Sum)}
	if q, ok := h.Quantile(TailQuantile); ok {
		g.P99Seconds = &q
	}
	return g
}

// Peers is the reading's peer IDs in order, for printing.
func (r Reading) Peers() []string {
	ids := make([]string, 0, len(r.PeerRTT))
	for id := range r.PeerRTT {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
