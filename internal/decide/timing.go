package decide

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The facts timing rests on (FACTS: "etcd timing").
const (
	// electionPerRTT: the election timeout at least 10 x the round trip.
	electionPerRTT = 10
	// maxElection: etcd refuses an election timeout over 50 s.
	maxElection = 50 * time.Second
	// etcdDefaultHeartbeat: etcd's own default heartbeat interval.
	etcdDefaultHeartbeat = 100 * time.Millisecond
	// connectShare: a connect is held to half the round-trip budget
	// (settings: connect limit election_timeout / 20, round trip / 10).
	connectShare = 2
	// timingStep: etcd takes both values in whole milliseconds; advice is
	// rounded up to 10 ms, a step no reading's noise is finer than.
	timingStep = 10 * time.Millisecond
)

// timingOf derives the timing advice from the published links and the WAL
// fsync judgements of the voters the attribution does not implicate.
func timingOf(s settings.Settings, hosts []*host, links []status.LinkRow, implicated []string) status.Timing {
	t := status.Timing{CurrentHeartbeatMs: s.HeartbeatInterval.Milliseconds(), CurrentElectionMs: s.ElectionTimeout.Milliseconds(),
		Excluded: implicated}
	voter := map[string]bool{}
	for _, h := range hosts {
		if h.role == status.RoleVoter && !slices.Contains(implicated, h.node.Name) {
			voter[h.node.Name] = true
		}
	}
	consider := func(r **status.TimingReading, v *float64, per float64, signal, from, to string) {
		if v == nil || math.IsNaN(*v) {
			return
		}
		if needs := *v * per; *r == nil || needs > (*r).Needs {
			*r = &status.TimingReading{Seconds: *v, Needs: needs, Signal: signal, From: from, To: to}
		}
	}
	for _, row := range links {
		if !voter[row.From] {
			continue
		}
		for _, c := range row.To {
			if !voter[c.Peer] {
				continue
			}
			if c.RTT != nil {
				consider(&t.RTT, c.RTT.Seconds, 1, status.SignalPeerRTT, row.From, c.Peer)
			}
			if c.Connect != nil {
				consider(&t.RTT, c.Connect.Seconds, connectShare, status.SignalConnect, row.From, c.Peer)
			}
		}
	}
	for _, h := range hosts {
		if !voter[h.node.Name] {
			continue
		}
		for i := range h.all {
			if g := &h.all[i]; g.kind == kindWALFsync && g.measured && !g.bare {
				v := g.value
				consider(&t.Fsync, &v, 1, status.SignalWALFsync, h.node.Name, "")
			}
		}
	}
	if t.RTT == nil && t.Fsync == nil {
		t.Verdict = status.TimingUnmeasured
		return t
	}
	var rtt, fsync time.Duration
	if t.RTT != nil {
		rtt = seconds(t.RTT.Needs)
	}
	if t.Fsync != nil {
		fsync = seconds(t.Fsync.Needs)
	}
	heartbeat := max(roundUp(max(rtt, fsync), timingStep), etcdDefaultHeartbeat)
	election := electionPerRTT * heartbeat
	t.HeartbeatMs, t.ElectionMs = heartbeat.Milliseconds(), election.Milliseconds()
	switch {
	case electionPerRTT*rtt > maxElection:
		t.Verdict = status.TimingBeyondEtcd
	case s.HeartbeatInterval >= max(rtt, fsync) && s.ElectionTimeout >= electionPerRTT*rtt:
		t.Verdict = status.TimingCovered
	default:
		t.Verdict = status.TimingRaise
		t.EtcdArgs = []string{fmt.Sprintf("heartbeat-interval=%d", t.HeartbeatMs), fmt.Sprintf("election-timeout=%d", t.ElectionMs)}
	}
	return t
}

func seconds(v float64) time.Duration { return time.Duration(math.Ceil(v * float64(time.Second))) }

func roundUp(d, step time.Duration) time.Duration {
	return (d + step - 1) / step * step
}
