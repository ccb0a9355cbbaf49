package status

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	SignalWakeup        = "wakeup_late"    // how late a timer set for one heartbeat interval woke
	SignalReadingErrors = "reading_errors" // readings that failed, reported only
)

// headroom is how far a reason's value is inside its limit, as a fraction of
// the limit: positive inside, negative over, -Inf for a failure with no
// number, +Inf for a reason with nothing to compare (judgement.headroom,
// for a published reason).
func headroom(r Reason) float64 {
	if r.Value == nil || r.Limit == nil {
		if r.OK {
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	return Margin(*r.Value, *r.Limit, r.Rule)
}

// IsMeasure reports a host signal that is measured, as opposed to the
// evidence that the host can be judged at all.
func IsMeasure(signal string) bool { return !evidence[signal] }

// evidence are the host signals that say whether a host can be judged at
// all, not what it measured: they have no margin and never make a host
// unfit (the decision's kind.isMeasure, which a test holds this to).
var evidence = map[string]bool{SignalEntry: true, SignalSamples: true, SignalFreshness: true, SignalEtcd: true, SignalReadingErrors: true}

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
			return strconv.FormatFloat(v/u.size, 'f', 2, 64) + " " + u.name
		}
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}

// RuleWord is how a rule reads in a sentence.
func RuleWord(r settings.Rule) string {
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
	return RuleWord(r) + " " + FormatValue(limit, unit)
}

// TextCap is the most bytes of any text a reason takes from a probe entry
// (an error text, an interface name, a directory, a filesystem type, a member
// ID, a decode error that quotes the entry): the entry is written by another
// party, and the status must fit one ConfigMap whatever it holds. The longest
// text the probe itself writes is a failed disk reading that quotes fio's
// output: "fsync reading in DIR: parse fio output: ERR: " and at most 200
// bytes of the output (internal/fsync/fio.go), about 350 bytes with the
// default directory; 512 bytes, the next power of two, cuts no real text.
const TextCap = 512

// Clip cuts an entry's text to TextCap bytes, at a character boundary, and
// ends it with a marker that says how long it was.
func Clip(s string) string {
	if len(s) <= TextCap {
		return s
	}
	marker := fmt.Sprintf("...[cut from %d bytes]", len(s))
	n := TextCap - len(marker)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + marker
}

// Printable escapes what a terminal would act on rather than print: C0 and
// C1 control characters, DEL, Unicode format characters (the bidi overrides
// and isolates U+202A-U+202E and U+2066-U+2069 among them), the line and
// paragraph separators, and bytes that are not UTF-8. Each becomes its Go
// escape (\n, \x1b, \u202e); every other character is kept. Text taken from an
// entry can then never forge a line or a column of a table.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// Margin is how far v is inside the limit l by rule, as a fraction of
// the limit: positive inside, negative over (the figure itself when the
// limit is 0).
func Margin(v, l float64, rule settings.Rule) float64 {
	d := l - v
	if rule == settings.AtLeast {
		d = v - l
	}
	if l == 0 {
		return d
	}
	return d / math.Abs(l)
}

// Decision reason signals: each step of the plan and each gate.
const (
	StepEtcd        = "etcd_present"
	StepEligible    = "eligible"
	StepFleetWide   = "fleet_wide"
	StepAttribution = "attribution"
	StepReplace     = "replace"
	StepPinned      = "pinned"
	StepCandidate   = "candidate"
	GateReported    = "gate_reported"
	GateLeader      = "gate_leader"
	GateLearner     = "gate_learner"
	GateConnected   = "gate_connected"
	GateMembers     = "gate_members"
	GateCooldown    = "gate_cooldown"
	StepSteady      = "steady"
)

// StepPlan is the decision's reason when planning itself panicked.
const StepPlan = "plan"

// GateProtected holds every swap while the records are unprotected.
const GateProtected = "gate_protected"

// SteadyPeriods bounds, in sample periods, how long the hysteresis holds a
// swap that stays named: every voter's next write lands within one period
// of the naming decision, and the controller's next decision within half a
// period after it (it decides twice a period); rounded up. The alerts take
// their durations from it (internal/alerts).
const SteadyPeriods = 2
