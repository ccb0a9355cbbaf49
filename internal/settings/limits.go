package settings

import (
	"fmt"
	"math"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Rule says which side of a limit is fit.
type Rule string

// The rules. Each limit takes the one its fact is worded with in
// docs/facts.md: "at least 10 times that round trip" makes the round trip fit up to and including
// a tenth of the election timeout; "should be under 10 ms" makes 10 ms itself
// unfit.
const (
	AtMost  Rule = "at_most"  // fit when value <= limit
	Under   Rule = "under"    // fit when value < limit
	AtLeast Rule = "at_least" // fit when value >= limit
	// Equal holds a count to one figure: acting's guards hold the etcd
	// member count to what the swap expects at each step.
	Equal Rule = "equal" // fit when value == limit
)

// Limit is one derived limit: its figure, unit, rule, and the derivation it
// rests on, as the status shows it.
type Limit struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Rule  Rule    `json:"rule"`
	// Basis is the formula and the fact in a line; each reason judged
	// against the limit carries it.
	Basis string `json:"basis"`
	// Derivation says it in full, once, in the status's settings.
	Derivation string `json:"derivation"`
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
	case Equal:
		return v == l.Value
	}
	return false
}

// Duration is the limit as a duration, for limits in seconds.
func (l Limit) Duration() time.Duration {
	return time.Duration(math.Round(l.Value * float64(time.Second)))
}

// Facts about etcd's disks (docs/facts.md, "etcd disks"): etcd's FAQ states them
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
		Basis: fmt.Sprintf("election_timeout %v / 10 = %v: etcd tuning, election timeout >= 10 x RTT", s.ElectionTimeout, d),
		Derivation: "etcd's tuning guide: the election timeout should be at least 10 times the round trip between members, " +
			"so a voter-to-voter round trip (etcd's own etcd_network_peer_round_trip_time_seconds, merged over the window) is fit up to a tenth of the election timeout"}
}

// ConnectLimit is the most a TCP connect to a voter's peer port may take at
// the tail.
func (s Settings) ConnectLimit() Limit {
	d := s.ElectionTimeout / 20
	return Limit{Name: "connect", Value: seconds(d), Unit: "seconds", Rule: AtMost,
		Basis: fmt.Sprintf("election_timeout %v / 20 = %v: half the round-trip budget, a connect sees only the network", s.ElectionTimeout, d),
		Derivation: "half of the round-trip limit (a tenth of the election timeout, etcd tuning): a TCP connect to a voter's peer port sees only the network, " +
			"and etcd needs the other half for its own work on the path; a failed connect counts as over the limit"}
}

// WALFsyncLimit is etcd's WAL fsync limit.
func (s Settings) WALFsyncLimit() Limit {
	return Limit{Name: "wal_fsync", Value: seconds(walFsyncFact), Unit: "seconds", Rule: Under,
		Basis:      "etcd FAQ: WAL fsync p99 under 10ms",
		Derivation: "etcd's FAQ and hardware guide: the p99 of etcd_disk_wal_fsync_duration_seconds should be under 10 ms; judged from the histogram deltas merged over the window"}
}

// BackendCommitLimit is etcd's backend commit limit.
func (s Settings) BackendCommitLimit() Limit {
	return Limit{Name: "backend_commit", Value: seconds(backendCommitFact), Unit: "seconds", Rule: Under,
		Basis:      "etcd FAQ: backend commit p99 under 25ms",
		Derivation: "etcd's FAQ: the p99 of etcd_disk_backend_commit_duration_seconds should be under 25 ms; judged from the histogram deltas merged over the window"}
}

// FdatasyncLimit is the limit on a non-voter's own disk reading: the WAL
// fsync fact, since the reading stands in for the WAL the host would write.
func (s Settings) FdatasyncLimit() Limit {
	return Limit{Name: "fdatasync", Value: seconds(walFsyncFact), Unit: "seconds", Rule: Under,
		Basis: "etcd's disk check: fdatasync p99 under 10ms",
		Derivation: "the disk check etcd's documentation points to (fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300) is fit when the p99 fdatasync latency is under 10 ms, " +
			"the WAL fsync fact; a non-voter has no etcd to measure, so the probe takes this reading once per window, and a reading on a memory filesystem measures nothing and is not held against the host"}
}

// MemoryLimit is the least memory a host must have available at the low
// tail: the storage quota. fromEtcd says the quota is the one etcd reports
// (etcd_server_quota_backend_bytes) rather than the storage_quota_bytes
// setting.
func (s Settings) MemoryLimit(quotaBytes uint64, fromEtcd bool) Limit {
	src := "storage_quota_bytes " + FormatBytes(quotaBytes)
	if fromEtcd {
		src = "etcd's quota " + FormatBytes(quotaBytes)
	}
	return Limit{Name: "memory_available", Value: float64(quotaBytes), Unit: "bytes", Rule: AtLeast,
		Basis: src + ": etcd's backend is memory-mapped",
		Derivation: "etcd's backend is memory-mapped, so a member whose available memory is below its storage quota pages under load; " +
			"the quota is the one etcd reports (etcd_server_quota_backend_bytes) on a voter, else storage_quota_bytes (etcd's default, 2 GiB)"}
}

// StallLimit is the most memory full-stall time a host may gain in one
// sample period at the tail.
func (s Settings) StallLimit() Limit {
	return Limit{Name: "memory_full_stall", Value: seconds(s.HeartbeatInterval), Unit: "seconds", Rule: Under,
		Basis: fmt.Sprintf("heartbeat_interval %v per sample period: a longer stall delays a heartbeat", s.HeartbeatInterval),
		Derivation: "the PSI memory full-stall time gained in one sample period, at its p99, must stay under one heartbeat interval: " +
			"a host stalled that long cannot send a heartbeat on time (etcd tuning: the heartbeat is about one round trip); absent PSI is reported, not held against the host"}
}

// WakeupLimit is the most a host's timer may wake late at the tail: the
// heartbeat interval. etcd's raft loop ticks from a ticker set for one
// heartbeat interval (etcd v3.6.15, server/etcdserver/raft.go, newRaftNode:
// time.NewTicker(heartbeat)), and its leader sends a heartbeat every tick
// (server/etcdserver/bootstrap.go, raftConfig: HeartbeatTick 1). newRaftNode
// also sets contention.NewTimeoutDetector(2 * heartbeat), and
// raftNode.processMessages observes each heartbeat with it
// (pkg/contention/contention.go, TimeoutDetector.Observe: late when the gap
// since the previous heartbeat to that peer passes the bound), counts each
// late one in etcd_server_heartbeat_send_failures_total and logs "leader
// failed to send out heartbeat on time". A tick that comes a heartbeat
// interval late makes that gap two intervals: etcd's bound itself, with
// nothing left for the work between the tick and the send. So the limit is
// unfit (under), as the memory stall at one heartbeat is.
func (s Settings) WakeupLimit() Limit {
	return Limit{Name: "wakeup_late", Value: seconds(s.HeartbeatInterval), Unit: "seconds", Rule: Under,
		Basis: fmt.Sprintf("heartbeat_interval %v: a tick that late makes a heartbeat gap of 2 x %v, which etcd counts as late (etcd_server_heartbeat_send_failures_total)",
			s.HeartbeatInterval, s.HeartbeatInterval),
		Derivation: "etcd's raft loop ticks from a ticker set for one heartbeat interval and its leader sends a heartbeat every tick " +
			"(etcd v3.6.15 server/etcdserver/raft.go newRaftNode, server/etcdserver/bootstrap.go raftConfig: HeartbeatTick 1); " +
			"etcd counts a heartbeat late when the gap since the previous one to that peer passes two heartbeat intervals " +
			"(newRaftNode: contention.NewTimeoutDetector(2 * heartbeat); raftNode.processMessages: etcd_server_heartbeat_send_failures_total, " +
			"\"leader failed to send out heartbeat on time\"). A process woken a heartbeat interval late makes that gap two intervals, " +
			"with nothing left for the work between the tick and the send, so the p99 of the window's per-sample largest lateness of the probe's own timer, " +
			"due once a heartbeat interval on a fixed schedule as etcd's ticker is, must stay under one heartbeat interval; a host starved of CPU runs every process late alike. " +
			"Judged on every recording host, voters and standbys: a standby that starves would be as bad a voter. Samples without a reading (a probe older than the reading) are reported, not held against the host"}
}

// WindowLimit is the number of samples a host needs before it is judged.
func (s Settings) WindowLimit() Limit {
	return Limit{Name: "samples", Value: float64(s.Window), Unit: "samples", Rule: AtLeast,
		Basis: fmt.Sprintf("window %d >= 1/(1-%g) = %d: a full window", s.Window, s.TailPercentile, s.MinWindow()),
		Derivation: fmt.Sprintf("a host is judged only over a full window: with the nearest-rank p%s, at least 1/(1-tail_percentile) = %d samples give the percentile a sample of its own "+
			"(with 100 samples one outlier is forgiven and two are not; with fewer the p99 is the maximum)", PercentileName(s.TailPercentile), s.MinWindow())}
}

// StaleAfter is how long a host's entry may go unchanged, as the controller
// sees it, before the host is unknown.
func (s Settings) StaleAfter() Limit {
	d := 3 * s.SamplePeriod
	return Limit{Name: "entry_unchanged", Value: seconds(d), Unit: "seconds", Rule: AtMost,
		Basis: fmt.Sprintf("3 x sample_period %v = %v, by the controller's clock", s.SamplePeriod, d),
		Derivation: "a probe whose entry has not changed for more than three sample periods has stopped reporting (a paused or cut-off host's last sample still looks healthy); " +
			"judged by when the controller saw the entry change, never by comparing the probe's clock with the controller's"}
}

// StalePeriods is entry_unchanged in sample periods (StaleAfter): how
// many periods a probe may go without a write the controller reads before
// its record is stale.
func (s Settings) StalePeriods() int {
	return int(math.Round(s.StaleAfter().Value / s.SamplePeriod.Seconds()))
}

// Cooldown is how long the voter set must stay unchanged before a swap.
func (s Settings) Cooldown() Limit {
	win := time.Duration(s.Window) * s.SamplePeriod
	d := s.LearnerStallTime + win
	return Limit{Name: "cooldown", Value: seconds(d), Unit: "seconds", Rule: AtLeast,
		Basis: fmt.Sprintf("learner_stall_time %v + window %d x %v = %v", s.LearnerStallTime, s.Window, s.SamplePeriod, d),
		Derivation: "after the voter set changes, k3s's learnerMaxStallTime lets a new learner be promoted or removed, and one more window gives every host " +
			"a full window of samples taken against the new voter set; no swap before both"}
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
		s.WakeupLimit(),
		s.Cooldown(),
	}
}

// MinWindow is the fewest samples whose nearest-rank tail percentile is not
// the window's extreme: the smallest n with Rank(p, n) < n, which is
// ceil(1/(1-p)) without floating point's off-by-one (1/(1-0.99) is
// 100.00000000000009). It uses the rank rule the verdicts use.
func (s Settings) MinWindow() int { return quantile.MinCount(s.TailPercentile) }

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
