package status

import (
	"fmt"
	"strings"
)

// Timing is the etcd timing the measured fleet calls for, beside the
// cluster's own (docs/limits.md, "Timing advice"). etcd's tuning guide: the
// heartbeat interval about the round trip between members, the election
// timeout at least ten times it, and at most 50 s; and a leader may have to
// write to its disk before it sends a heartbeat (etcd FAQ, "failed to send
// out heartbeat on time": "usually caused by a slow disk"), so a heartbeat
// shorter than the WAL fsync tail goes out late. Every limit of fleet-role
// derives from the election timeout: raising it raises the connect and
// round-trip limits too, so the settings' election_timeout and
// heartbeat_interval must follow k3s's.
type Timing struct {
	// RTT is the round trip between two voters that calls for the most:
	// etcd's own peer round trip, or a TCP connect, which counts twice (a
	// connect sees only the network, and the connect limit is half the
	// round-trip budget: docs/limits.md, "The limits"). Nil when no pair of
	// voters measured either.
	RTT *TimingReading `json:"rtt,omitempty"`
	// Fsync is the largest WAL fsync tail of a voter; nil when none
	// reported one.
	Fsync *TimingReading `json:"fsync,omitempty"`
	// HeartbeatMs and ElectionMs are what the readings call for, in
	// milliseconds as etcd takes them: the heartbeat the larger of the two
	// tails rounded up to a whole 10 ms, and never under etcd's own
	// default (100 ms, the value its guide gives a local network); the
	// election timeout ten heartbeats, as etcd's defaults and k3s's pair
	// them. 0 when nothing was measured.
	HeartbeatMs int64 `json:"heartbeat_ms"`
	ElectionMs  int64 `json:"election_timeout_ms"`
	// CurrentHeartbeatMs and CurrentElectionMs are the cluster's, as the
	// settings give them (heartbeat_interval, election_timeout).
	CurrentHeartbeatMs int64         `json:"current_heartbeat_ms"`
	CurrentElectionMs  int64         `json:"current_election_timeout_ms"`
	Verdict            TimingVerdict `json:"verdict"`
	// EtcdArgs are k3s's etcd-arg values that set what is called for,
	// when the cluster's timing does not cover the readings.
	EtcdArgs []string `json:"etcd_args,omitempty"`
	// Excluded are the voters the attribution implicates
	// (Decision.Implicated), whose readings are left out: slow links one
	// host explains are that host's, and the swap is their remedy, not a
	// timing every voter must live with. Slow links no host explains (a
	// slow network between sites) count, and call for the timing.
	Excluded []string `json:"excluded,omitempty"`
}

// TimingReading is one tail that timing is called for by, and where it was
// measured.
type TimingReading struct {
	Seconds float64 `json:"seconds"`
	// Needs is the round trip or the fsync it calls for timing to cover:
	// Seconds, or twice it for a connect.
	Needs float64 `json:"needs_seconds"`
	// Signal is the reading: peer_rtt, connect or wal_fsync.
	Signal string `json:"signal"`
	From   string `json:"from"`
	// To is the other end of a round trip; empty for a disk.
	To string `json:"to,omitempty"`
}

// TimingVerdict is what Timing makes of the cluster's timing.
type TimingVerdict string

const (
	// TimingCovered: the heartbeat is at least both tails, and the
	// election timeout at least ten round trips.
	TimingCovered TimingVerdict = "covered"
	// TimingRaise: one is short; EtcdArgs say what to set.
	TimingRaise TimingVerdict = "raise"
	// TimingBeyondEtcd: ten round trips pass etcd's 50 s: no timing
	// covers the path, and the voters on it must not vote together.
	TimingBeyondEtcd TimingVerdict = "beyond_etcd"
	// TimingUnmeasured: no voter measured a round trip or a WAL fsync.
	TimingUnmeasured TimingVerdict = "unmeasured"
)

// Sentence says the advice in one line, for the table and the page.
func (t Timing) Sentence() string {
	cur := fmt.Sprintf("heartbeat %d ms, election timeout %d ms", t.CurrentHeartbeatMs, t.CurrentElectionMs)
	if t.Verdict == TimingUnmeasured {
		return "timing: " + cur + "; no voter has measured a round trip or a WAL fsync yet" + t.excludedClause()
	}
	var by []string
	if r := t.RTT; r != nil {
		if r.Signal == SignalConnect {
			by = append(by, fmt.Sprintf("connect %s-%s %s (a round-trip budget of %s)", r.From, r.To, ms(r.Seconds), ms(r.Needs)))
		} else {
			by = append(by, fmt.Sprintf("round trip %s-%s %s", r.From, r.To, ms(r.Seconds)))
		}
	}
	if r := t.Fsync; r != nil {
		by = append(by, fmt.Sprintf("WAL fsync on %s %s", r.From, ms(r.Seconds)))
	}
	measured := joinAnd(by)
	var line string
	switch t.Verdict {
	case TimingCovered:
		line = fmt.Sprintf("timing: %s covers the slowest %s (etcd's guide calls for at least %d ms and %d ms)", cur, measured, t.HeartbeatMs, t.ElectionMs)
	case TimingBeyondEtcd:
		line = fmt.Sprintf("timing: the slowest %s needs an election timeout over etcd's 50 s: no timing covers it; those voters must not vote together", measured)
	default:
		line = fmt.Sprintf("timing: %s is short for the slowest %s: set k3s etcd-arg %s and the settings' heartbeat_interval and election_timeout to match", cur, measured, joinAnd(t.EtcdArgs))
	}
	return line + t.excludedClause()
}

// excludedClause names the voters left out, if any.
func (t Timing) excludedClause() string {
	if len(t.Excluded) == 0 {
		return ""
	}
	return fmt.Sprintf("; %s left out: the attribution implicates %s, and the swap, not the timing, is the remedy", strings.Join(t.Excluded, ", "), Plural(len(t.Excluded), "it", "them"))
}

func ms(s float64) string { return fmt.Sprintf("%.1f ms", s*1e3) }

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	out := parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		out += ", " + p
	}
	return out + " and " + parts[len(parts)-1]
}
