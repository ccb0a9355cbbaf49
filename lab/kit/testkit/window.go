package testkit

import (
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Bucket bounds of etcd v3.6's histograms (prometheus.ExponentialBuckets):
// the disk histograms from 1 ms in 14 doublings, the peer round trip from
// 0.1 ms in 16.
var (
	diskBounds = exponential(0.001, 14)
	rttBounds  = exponential(0.0001, 16)
)

func exponential(start float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start
		start *= 2
	}
	return out
}

// RealisticEntry is a full window of a busy k3s host as its probe records
// it, with every figure varying from sample to sample as a real host's does:
// connects of a few hundred microseconds to a few milliseconds to every
// voter, available memory moving by the KiB, a small memory stall now and
// then, a timer waking 1 to 20 ms late (an unstarved host, lab/cmd/votercpu),
// and on a voter (self >= 0, its index in voters) an etcd whose WAL
// and backend histograms gain hundreds of observations over four buckets
// each period (fsyncs up to 8 ms, commits up to 16 ms: a fit disk) and whose round-trip histograms gain about one observation per
// peer per period (docs/facts.md: about two values every 30 s). A standby carries
// a disk reading. Seeded by the node name: the same call gives the same
// entry.
func RealisticEntry(node string, voters []string, self, window int, period time.Duration, t0 time.Time) entry.Entry {
	h := fnv.New64a()
	h.Write([]byte(node))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(self+7)))
	// The wake-up lateness draws from a source of its own, so that the
	// other figures are those of the entries before it had one.
	lateRng := rand.New(rand.NewPCG(h.Sum64(), uint64(self+8)))
	e := entry.Entry{Node: node}
	db := uint64(40<<20 + rng.IntN(20<<20))
	for i := range window {
		stall := 0.0
		if rng.IntN(10) == 0 {
			stall = float64(rng.IntN(30000)) * 1e-6
		}
		late := float64(1000+lateRng.IntN(19000)) * 1e-6
		s := entry.Sample{
			At:                  t0.Add(time.Duration(i)*period + time.Duration(rng.IntN(40))*time.Millisecond),
			Restart:             i == 0,
			Link:                entry.Link{Interface: "enp3s0", Class: entry.ClassWired},
			MemTotalBytes:       32 << 30,
			MemAvailableBytes:   uint64(14<<20+rng.IntN(4<<20)) * 1024,
			MemFullStallSeconds: &stall,
			WakeupLateSeconds:   &late,
			Connect:             map[string]entry.Connect{},
		}
		if i == 0 {
			// No baseline after a start, and no timer fallen due.
			s.MemFullStallSeconds, s.WakeupLateSeconds = nil, nil
		}
		for j, v := range voters {
			if j != self {
				s.Connect[v] = entry.Connect{Seconds: float64(250+rng.IntN(2500)) * 1e-6}
			}
		}
		if self >= 0 {
			db += uint64(rng.IntN(64 << 10))
			x := &entry.EtcdSample{MemberID: MemberID(voters[self]), IsLeader: self == 0, HasLeader: true,
				ConnectedPeers: len(voters) - 1, KnownPeers: len(voters) - 1, DBSizeBytes: db, QuotaBytes: 2 << 30}
			if i > 0 {
				x.WALFsync = spread(diskBounds, rng, 0, 4, 900)
				x.BackendCommit = spread(diskBounds, rng, 1, 4, 300)
				for j, v := range voters {
					if j != self && rng.IntN(4) != 0 {
						if x.PeerRTT == nil {
							x.PeerRTT = map[string]quantile.Histogram{}
						}
						x.PeerRTT[MemberID(v)] = spread(rttBounds, rng, 3+rng.IntN(3), 1, 2)
					}
				}
			}
			s.Etcd = x
		}
		entry.Append(&e, s, window)
	}
	if self < 0 {
		f := FitFsync(t0.Add(period))
		f.Dir = "/var/lib/rancher/k3s/server/db/fleet-role-fsync"
		e.Fsync = &f
	}
	return e
}

// spread puts 1 to most observations in each of k buckets from first.
func spread(bounds []float64, rng *rand.Rand, first, k, most int) quantile.Histogram {
	h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
	for b := first; b < first+k && b < len(h.Counts); b++ {
		h.Counts[b] = uint64(1 + rng.IntN(most))
	}
	return h
}
