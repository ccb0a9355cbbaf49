package settings

import (
	"fmt"
	"math"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Rule says which side of a limit is fit.
type Rule string

// The three rules. Each limit takes the one its fact is worded with in
// FACTS.md: "at least 10 x RTT" makes the round trip fit up to and including
// a tenth of the election timeout; "should be under 10 ms" makes 10 ms itself
// unfit.
const (
	AtMost  Rule = "at_most"  // fit when value <= limit
	Under   Rule = "under"    // fit when value < limit
	AtLeast Rule = "at_least" // fit when value >= limit
)

// Limit is one derived limit: its figure, unit, rule, and the derivation it
// rests on, as the status shows it.
type Limit struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Rule  Rule    `json:"rule"`
	Basis string  `json:"basis"`
}

// OK reports whether v is fit against l. NaN is never fit.
func (l Limit) OK(v float64) bool {
	switch l.Rule {
	case AtMost:
		return v <= l.Value
	case Under:
		return v < l.Value
	case AtLeast:
		return v >= l.Value
	}
	return false
}

// Duration is the limit as a duration, for limits in seconds.
func (l Limit) Duration() time.Duration {
	return time.Duration(math.Round(l.Value * float64(time.Second)))
}

// Facts about etcd's disks (FACTS.md, "etcd disks"): etcd's FAQ states them
// as p99 latencies that should be under these figures.
const (
	walFsyncFact      = 10 * time.Millisecond
	backendCommitFact = 25 * time.Millisecond
)

func seconds(d time.Duration) float64 { return d.Seconds() }

// RTTLimit is the most a voter-to-voter round trip may take at the tail.
func (s Settings) RTTLimit() Limit {
	d := s.ElectionTimeout / 10
	return Limit{Name: "peer_rtt", Value: seconds(d), Unit: "seconds", Rule: AtMost,
		Basis: fmt.Sprintf("election_timeout %v / 10 = %v: etcd tuning, the election timeout is at least 10 x the round trip between members", s.ElectionTimeout, d)}
}

// ConnectLimit is the most a TCP connect to a voter's peer port may take at
// the tail.
func (s Settings) ConnectLimit() Limit {
	d := s.ElectionTimeout / 20
	return Limit{Name: "connect", Value: seconds(d), Unit: "seconds", Rule: AtMost,
		Basis: fmt.Sprintf("election_timeout %v / 20 = %v: half the round-trip budget (etcd tuning: election timeout at least 10 x RTT), since a connect sees only the network and etcd needs the rest", s.ElectionTimeout, d)}
}

// WALFsyncLimit is etcd's WAL fsync limit.
func (s Settings) WALFsyncLimit() Limit {
	return Limit{Name: "wal_fsync", Value: seconds(walFsyncFact), Unit: "seconds", Rule: Under,
		Basis: "etcd FAQ: p99 of etcd_disk_wal_fsync_duration_seconds should be under 10ms"}
}

// BackendCommitLimit is etcd's backend commit limit.
func (s Settings) BackendCommitLimit() Limit {
	return Limit{Name: "backend_commit", Value: seconds(backendCommitFact), Unit: "seconds", Rule: Under,
		Basis: "etcd FAQ: p99 of etcd_disk_backend_commit_duration_seconds should be under 25ms"}
}

// FdatasyncLimit is the limit on a non-voter's own disk reading: the WAL
// fsync fact, since the reading stands in for the WAL the host would write.
func (s Settings) FdatasyncLimit() Limit {
	return Limit{Name: "fdatasync", Value: seconds(walFsyncFact), Unit: "seconds", Rule: Under,
		Basis: "etcd's disk check (fio --fdatasync=1 --bs=2300): fit when the p99 fdatasync latency is under 10ms, the WAL fsync fact"}
}

// MemoryLimit is the least memory a host must have available at the low
// tail: the storage quota. fromEtcd says the quota is the one etcd reports
// (etcd_server_quota_backend_bytes) rather than the storage_quota_bytes
// setting.
func (s Settings) MemoryLimit(quotaBytes uint64, fromEtcd bool) Limit {
	src := "storage_quota_bytes " + FormatBytes(quotaBytes) + " (etcd's default quota; etcd reports none for this host)"
	if fromEtcd {
		src = "the quota etcd reports, " + FormatBytes(quotaBytes)
	}
	return Limit{Name: "memory_available", Value: float64(quotaBytes), Unit: "bytes", Rule: AtLeast,
		Basis: "at least " + src + ": etcd's backend is memory-mapped, so a member with less available memory than its quota pages under load"}
}

// StallLimit is the most memory full-stall time a host may gain in one
// sample period at the tail.
func (s Settings) StallLimit() Limit {
	return Limit{Name: "memory_full_stall", Value: seconds(s.HeartbeatInterval), Unit: "seconds", Rule: Under,
		Basis: fmt.Sprintf("under one heartbeat_interval %v per sample period: a stall that long delays a heartbeat (etcd tuning: the heartbeat is about one round trip)", s.HeartbeatInterval)}
}

// WindowLimit is the number of samples a host needs before it is judged.
func (s Settings) WindowLimit() Limit {
	return Limit{Name: "samples", Value: float64(s.Window), Unit: "samples", Rule: AtLeast,
		Basis: fmt.Sprintf("window %d: a verdict needs a full window; at least 1/(1-tail_percentile) = %d samples give the p%s a sample of its own", s.Window, s.MinWindow(), PercentileName(s.TailPercentile))}
}

// StaleAfter is how long a host's entry may go unchanged, as the controller
// sees it, before the host is unknown.
func (s Settings) StaleAfter() Limit {
	d := 3 * s.SamplePeriod
	return Limit{Name: "entry_unchanged", Value: seconds(d), Unit: "seconds", Rule: AtMost,
		Basis: fmt.Sprintf("3 x sample_period %v = %v: a probe that has missed three samples in a row has stopped reporting (judged by when the controller saw the entry change, never by the probe's clock)", s.SamplePeriod, d)}
}

// Cooldown is how long the voter set must stay unchanged before a swap.
func (s Settings) Cooldown() Limit {
	win := time.Duration(s.Window) * s.SamplePeriod
	d := s.LearnerStallTime + win
	return Limit{Name: "cooldown", Value: seconds(d), Unit: "seconds", Rule: AtLeast,
		Basis: fmt.Sprintf("learner_stall_time %v (k3s learnerMaxStallTime) + one window (%d x %v = %v) = %v: a new member has had time to be promoted or removed, and a full window of samples has been taken with the new voter set", s.LearnerStallTime, s.Window, s.SamplePeriod, win, d)}
}

// Limits lists every derived limit for the status, memory at the default
// quota (a voter's own quota is in its reasons).
func (s Settings) Limits() []Limit {
	return []Limit{
		s.WindowLimit(),
		s.StaleAfter(),
		s.RTTLimit(),
		s.ConnectLimit(),
		s.WALFsyncLimit(),
		s.BackendCommitLimit(),
		s.FdatasyncLimit(),
		s.MemoryLimit(s.StorageQuotaBytes, false),
		s.StallLimit(),
		s.Cooldown(),
	}
}

// MinWindow is the fewest samples whose nearest-rank tail percentile is not
// the window's extreme: the smallest n with Rank(p, n) < n, which is
// ceil(1/(1-p)) without floating point's off-by-one (1/(1-0.99) is
// 100.00000000000009). It uses the rank rule the verdicts use.
func (s Settings) MinWindow() int {
	p := s.TailPercentile
	if !(p > 0 && p < 1) {
		return 0
	}
	est := 1 / (1 - p)
	if est > 1<<40 {
		return math.MaxInt
	}
	n := int(math.Round(est))
	if n < 2 {
		n = 2
	}
	for quantile.Rank(p, n) >= n {
		n++
	}
	for n > 2 && quantile.Rank(p, n-1) < n-1 {
		n--
	}
	return n
}

// percentileName renders 0.99 as "99".
func PercentileName(p float64) string {
	return fmt.Sprintf("%g", math.Round(p*1e6)/1e4)
}

// FormatBytes renders n in the largest binary unit that divides it exactly
// ("2 GiB"), else in bytes.
func FormatBytes(n uint64) string {
	units := []struct {
		size uint64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}
	for _, u := range units {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
