package decide

import (
	"fmt"
	"math"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Signals: the name of each judgement in a host's reasons.
const (
	SignalEntry         = "entry"            // the probe entry is missing or unreadable
	SignalRecord        = "record"           // the record is full (shrunk to fit its cap) or its write was refused
	SignalSamples       = "samples"          // a full window of samples
	SignalFreshness     = "entry_unchanged"  // the entry changed recently enough
	SignalEtcd          = "etcd"             // a voter's etcd metrics were read
	SignalLink          = "link"             // the default route's interface
	SignalConnect       = "connect"          // TCP connect to a voter's peer port
	SignalPeerRTT       = "peer_rtt"         // etcd's own peer round trip
	SignalWALFsync      = "wal_fsync"        // etcd's WAL fsync
	SignalBackendCommit = "backend_commit"   // etcd's backend commit
	SignalFdatasync     = "fdatasync"        // a non-voter's own disk reading
	SignalMemory        = "memory_available" // available memory, low tail
	SignalStall         = "memory_full_stall"
	SignalReadingErrors = "reading_errors" // readings that failed, reported only
)

// signalOrder fixes the order of a host's reasons.
var signalOrder = map[string]int{
	SignalEntry: 0, SignalRecord: 0, SignalSamples: 1, SignalFreshness: 2, SignalEtcd: 3, SignalLink: 4,
	SignalConnect: 5, SignalPeerRTT: 6, SignalWALFsync: 7, SignalBackendCommit: 8,
	SignalFdatasync: 9, SignalMemory: 10, SignalStall: 11, SignalReadingErrors: 12,
}

func num(v float64) *float64 { return &v }

// against judges v against l.
func against(l settings.Limit, signal, subject string, v float64, detail string) Reason {
	return Reason{Signal: signal, Subject: subject, Value: num(v), Limit: num(l.Value), Unit: l.Unit,
		Rule: l.Rule, Basis: l.Basis, OK: l.OK(v), Detail: detail}
}

// unmeasured reports a signal with no number, which is not held against the
// host (ok) or makes its verdict unknown (!ok).
func unmeasured(signal, subject, basis, detail string, ok bool) Reason {
	return Reason{Signal: signal, Subject: subject, Basis: basis, OK: ok, Detail: detail, unknown: !ok}
}

// headroom is how far a reason's value is inside its limit, as a fraction of
// the limit: positive inside, negative over, -Inf for a failure with no
// number, +Inf for a reason with nothing to compare.
func headroom(r Reason) float64 {
	if r.Value == nil || r.Limit == nil {
		if r.OK {
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	v, l := *r.Value, *r.Limit
	d := l - v
	if r.Rule == settings.AtLeast {
		d = v - l
	}
	if l == 0 {
		return d
	}
	return d / math.Abs(l)
}

// minHeadroom is the tightest headroom among reasons that pass keep.
func minHeadroom(rs []Reason, keep func(Reason) bool) float64 {
	m := math.Inf(1)
	for _, r := range rs {
		if keep(r) {
			m = math.Min(m, headroom(r))
		}
	}
	return m
}

// isMeasure reports a reason about a measured signal, as opposed to the
// evidence that the host can be judged at all; only these have margins.
func isMeasure(r Reason) bool {
	switch r.Signal {
	case SignalEntry, SignalSamples, SignalFreshness, SignalEtcd, SignalReadingErrors:
		return false
	}
	return true
}

// isLink reports a reason about the path between two hosts.
func isLink(r Reason) bool { return r.Signal == SignalConnect || r.Signal == SignalPeerRTT }

// FormatValue renders a number in a reason's unit for people: durations as
// Go durations to the microsecond, bytes in binary units.
func FormatValue(v float64, unit string) string {
	switch unit {
	case "seconds":
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Sprint(v)
		}
		// Microseconds tell disk and loopback latencies apart; above a
		// second they are noise.
		if math.Abs(v) >= 1 {
			return (time.Duration(math.Round(v*1e3)) * time.Millisecond).String()
		}
		return (time.Duration(math.Round(v*1e6)) * time.Microsecond).String()
	case "bytes":
		return formatBytes(v)
	case "":
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

func formatBytes(v float64) string {
	for _, u := range []struct {
		size float64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if math.Abs(v) >= u.size {
			return fmt.Sprintf("%.2f %s", v/u.size, u.name)
		}
	}
	return fmt.Sprintf("%.0f B", v)
}

// ruleWord is how a rule reads in a sentence.
func ruleWord(r settings.Rule) string {
	switch r {
	case settings.AtMost:
		return "at most"
	case settings.Under:
		return "under"
	case settings.AtLeast:
		return "at least"
	}
	return string(r)
}

// limitPhrase is a limit as it reads after "must be": "at most 250ms", or
// the bare target of a count that must equal it.
func limitPhrase(r settings.Rule, limit float64, unit string) string {
	if r == "" {
		return FormatValue(limit, unit)
	}
	return ruleWord(r) + " " + FormatValue(limit, unit)
}
