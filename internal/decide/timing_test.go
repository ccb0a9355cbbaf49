package decide

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// timingFleet is three voters a, b, c and a standby s: a measured rtt (etcd's
// round trip) and connect (seconds) to b, every other link 1 ms; each voter's
// WAL fsync tail is fsync.
func timingFleet(rtt, connect, fsync float64) ([]*host, []status.LinkRow) {
	var hosts []*host
	for _, n := range []string{"a", "b", "c", "s"} {
		h := &host{node: k3snode.Node{Name: n}, role: status.RoleVoter}
		if n == "s" {
			h.role = status.RoleStandby
		} else {
			h.all = []judgement{{kind: kindWALFsync, measured: true, value: fsync}}
		}
		hosts = append(hosts, h)
	}
	ms := 0.001
	cell := func(peer string, rtt, connect float64) status.LinkCell {
		return status.LinkCell{Peer: peer, RTT: &status.LinkReading{Seconds: &rtt}, Connect: &status.LinkReading{Seconds: &connect}}
	}
	links := []status.LinkRow{
		{From: "a", To: []status.LinkCell{cell("b", rtt, connect), cell("c", ms, ms)}},
		{From: "b", To: []status.LinkCell{cell("a", ms, ms), cell("c", ms, ms)}},
		{From: "c", To: []status.LinkCell{cell("a", ms, ms), cell("b", ms, ms)}},
		// A standby's links are no voter's round trip: left out however slow.
		{From: "s", To: []status.LinkCell{cell("a", 9, 9)}},
	}
	return hosts, links
}

// The advice at, under and over each of its limits, at k3s's timing
// (heartbeat 500 ms, election timeout 5 s): the heartbeat at least the
// round trip (a connect counting twice) and the WAL fsync tail, the election
// timeout at least ten round trips, etcd's 50 s at most, its 100 ms
// heartbeat at least, rounded up to 10 ms.
func TestTimingAdvice(t *testing.T) {
	s := settings.Defaults()
	const ms = 0.001
	for _, tc := range []struct {
		name                string
		rtt, connect, fsync float64
		verdict             status.TimingVerdict
		heartbeat, election int64
		args                string
	}{
		{"a local network: covered, etcd's floor called for", 2 * ms, 1 * ms, 2 * ms, status.TimingCovered, 100, 1000, ""},
		{"round trip at the heartbeat: covered", 500 * ms, 1 * ms, 2 * ms, status.TimingCovered, 500, 5000, ""},
		{"round trip just over: raise, rounded up to 10 ms", 500.001 * ms, 1 * ms, 2 * ms, status.TimingRaise, 510, 5100, "heartbeat-interval=510 and election-timeout=5100"},
		{"connect at half the heartbeat: covered", 1 * ms, 250 * ms, 2 * ms, status.TimingCovered, 500, 5000, ""},
		{"connect just over half: raise", 1 * ms, 250.001 * ms, 2 * ms, status.TimingRaise, 510, 5100, "heartbeat-interval=510 and election-timeout=5100"},
		{"WAL fsync at the heartbeat: covered", 1 * ms, 1 * ms, 500 * ms, status.TimingCovered, 500, 5000, ""},
		{"WAL fsync over it: raise", 1 * ms, 1 * ms, 501 * ms, status.TimingRaise, 510, 5100, "heartbeat-interval=510 and election-timeout=5100"},
		{"ten round trips at etcd's 50 s: raise", 5, 1 * ms, 2 * ms, status.TimingRaise, 5000, 50000, "heartbeat-interval=5000 and election-timeout=50000"},
		{"ten round trips past 50 s: beyond etcd", 5.001, 1 * ms, 2 * ms, status.TimingBeyondEtcd, 5010, 50100, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts, links := timingFleet(tc.rtt, tc.connect, tc.fsync)
			got := timingOf(s, hosts, links, nil)
			if got.Verdict != tc.verdict || got.HeartbeatMs != tc.heartbeat || got.ElectionMs != tc.election {
				t.Fatalf("%+v: want %s, %d ms and %d ms", got, tc.verdict, tc.heartbeat, tc.election)
			}
			if got.CurrentHeartbeatMs != 500 || got.CurrentElectionMs != 5000 {
				t.Errorf("current %d/%d ms, want k3s's 500/5000", got.CurrentHeartbeatMs, got.CurrentElectionMs)
			}
			if args := strings.Join(got.EtcdArgs, " and "); args != tc.args { // at most two: as joinAnd writes them
				t.Errorf("etcd-arg %q, want %q", args, tc.args)
			}
			if sentence := got.Sentence(); !strings.HasPrefix(sentence, "timing: ") || (tc.args != "" && !strings.Contains(sentence, tc.args)) {
				t.Errorf("sentence %q", sentence)
			}
		})
	}
}

// The voters the attribution implicates are left out: the advice is the
// other voters', and names them.
func TestTimingLeavesOutTheImplicated(t *testing.T) {
	hosts, links := timingFleet(0.9, 0.9, 0.002)
	if got := timingOf(settings.Defaults(), hosts, links, nil); got.Verdict != status.TimingRaise {
		t.Fatalf("a-b at 900 ms, none implicated: %s, want raise", got.Verdict)
	}
	got := timingOf(settings.Defaults(), hosts, links, []string{"b"})
	if got.Verdict != status.TimingCovered || got.RTT == nil || got.RTT.From == "b" || got.RTT.To == "b" || !slices.Equal(got.Excluded, []string{"b"}) {
		t.Fatalf("b implicated: %+v (rtt %+v), want covered by the others' links, b left out", got, got.RTT)
	}
	if !strings.Contains(got.Sentence(), "b left out: the attribution implicates it") {
		t.Errorf("sentence %q does not name b", got.Sentence())
	}
	if got := timingOf(settings.Defaults(), nil, nil, nil); got.Verdict != status.TimingUnmeasured || got.HeartbeatMs != 0 {
		t.Errorf("no voters: %+v, want unmeasured", got)
	}
}

// k3s's defaults against etcd's: the same rule at etcd's own timing.
func TestTimingAtEtcdsDefaults(t *testing.T) {
	s := settings.Defaults()
	s.HeartbeatInterval, s.ElectionTimeout = 100*time.Millisecond, time.Second
	hosts, links := timingFleet(0.1, 0.05, 0.002)
	if got := timingOf(s, hosts, links, nil); got.Verdict != status.TimingCovered || got.HeartbeatMs != 100 || got.ElectionMs != 1000 {
		t.Errorf("%+v: want covered at 100/1000", got)
	}
	hosts, links = timingFleet(0.1, 0.050001, 0.002)
	if got := timingOf(s, hosts, links, nil); got.Verdict != status.TimingRaise || got.HeartbeatMs != 110 {
		t.Errorf("%+v: want raise to 110 ms", got)
	}
}
