package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/status"
)

// A sample in which a voter's etcd had no leader holds every swap for as
// long as it is in the window: the window measured an election or a
// partition, and its slow links may be that. The oldest sample of the window
// counts; one just rolled out of it does not.
func TestLeaderlessSampleInTheWindowHoldsTheSwap(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples int // charlie's entry holds this many samples, the first leaderless
		held    bool
	}{
		{"the oldest sample of the window", 0, true},
		{"a sample just rolled out of the window", 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := votersFleet(t, 3)
			f.slowHost("bravo")
			ch := f.host("charlie")
			ch.samples = f.s.Window + c.samples
			ch.etcdMod = func(i, n int, x *entry.EtcdSample) {
				if i == 0 {
					x.HasLeader = false
				}
			}
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			if !c.held {
				wantSwap(t, st, "bravo", "standby-1")
				return
			}
			wantNone(t, st, status.GateLeader)
			r := decisionReason(t, st, status.GateLeader, "charlie")
			if !strings.Contains(r.Detail, "reported no leader in 1 of its window's 100 samples") || *r.Value != 1 || *r.Limit != 0 {
				t.Fatalf("gate_leader: %+v", r)
			}
		})
	}
}

// So does a sample in which a voter's etcd was connected to fewer than the
// other voters.
func TestDisconnectedSampleInTheWindowHoldsTheSwap(t *testing.T) {
	f := votersFleet(t, 3)
	f.slowHost("bravo")
	f.host("alpha").etcdMod = func(i, n int, x *entry.EtcdSample) {
		if i == n/2 {
			x.ConnectedPeers = 1
		}
	}
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	wantNone(t, st, status.GateConnected)
	r := decisionReason(t, st, status.GateConnected, "alpha")
	if !strings.Contains(r.Detail, "was connected to 1 of the 2 other voters at") || *r.Value != 1 || *r.Limit != 2 {
		t.Fatalf("gate_connected: %+v", r)
	}
}

// A voter whose latest connects to and from every other voter failed, as
// many in a row as turn a tail slow (2 at a window of 100 and the p99), is
// cut off, whatever its etcd's gauges still say: they show a partition only
// once its streams time out. One way answering is not a cut, nor is one
// failed connect fewer.
func TestCutOffVoter(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(from, to string) bool
		last int // the latest samples whose connects fail
		cut  bool
	}{
		{"the latest 2 connects to and from bravo failed", func(from, to string) bool { return from == "bravo" || to == "bravo" }, 2, true},
		{"only the latest 1", func(from, to string) bool { return from == "bravo" || to == "bravo" }, 1, false},
		{"bravo still reaches alpha", func(from, to string) bool { return to == "bravo" || from == "bravo" && to != "alpha" }, 2, false},
		{"alpha still reaches bravo", func(from, to string) bool { return from == "bravo" || to == "bravo" && from != "alpha" }, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := votersFleet(t, 3)
			f.slowHost("bravo")
			for _, h := range f.hosts {
				from := h.name
				h.connectMod = func(i, n int, to string, conn *entry.Connect) {
					if i >= n-c.last && c.fail(from, to) {
						*conn = entry.Connect{Err: "dial tcp: i/o timeout"}
					}
				}
			}
			st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
			if !c.cut {
				for _, r := range st.Decision.Reasons {
					if r.Signal == status.GateConnected && !r.OK {
						t.Fatalf("not cut off, yet %+v", r)
					}
				}
				return
			}
			wantNone(t, st, status.GateConnected)
			r := decisionReason(t, st, status.GateConnected, "bravo")
			if !strings.Contains(r.Detail, "bravo is cut off from the other voters") {
				t.Fatalf("gate_connected: %+v", r)
			}
		})
	}
}

// The voter a published swap removes is not held for by its own record
// gone unwritten or by its own connects read as a cut: a path lossy enough
// to earn the swap delays that voter's writes and fails its connects in
// runs, and would withdraw the swap (the fault campaign's flaps at 26% and
// 38% loss). Another voter's stale record still holds, and so does every
// gate before the swap is published.
func TestGatesLetTheLeavingVoterGo(t *testing.T) {
	published := func(t *testing.T, f *gFleet) *status.Status {
		t.Helper()
		st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
		wantSwap(t, st, "bravo", "standby-1")
		return everyRecordChanged(st)
	}
	// next is the decision a period after prev's.
	next := func(t *testing.T, f *gFleet, prev *status.Status) status.Status {
		in := f.input(t, prev)
		in.Now = prev.GeneratedAt.Add(f.s.SamplePeriod)
		return decide.Decide(in)
	}
	cut := func(f *gFleet) {
		for _, h := range f.hosts {
			from := h.name
			h.connectMod = func(i, n int, to string, conn *entry.Connect) {
				if i >= n-2 && (from == "bravo" || to == "bravo") {
					*conn = entry.Connect{Err: "dial tcp: i/o timeout"}
				}
			}
		}
	}
	// stale leaves name's record unchanged since four periods before the
	// next decision, after the swap was first named (as a lossy voter's
	// record, written late, was in the campaign).
	stale := func(t *testing.T, f *gFleet, prev *status.Status, name string) {
		h := f.host(name)
		at := prev.GeneratedAt.Add(-3 * f.s.SamplePeriod)
		h.until = at
		prev.Memory.NamedSince = at.Add(-time.Second)
		for i := range prev.Hosts {
			if prev.Hosts[i].Name == name {
				prev.Hosts[i].Observation = &status.Observation{Digest: decide.Digest(f.rawEntry(t, h)), ChangedAt: at}
			}
		}
	}
	t.Run("cut by its connects, after the swap", func(t *testing.T) {
		f := votersFleet(t, 3)
		f.slowHost("bravo")
		prev := published(t, f)
		cut(f)
		st := next(t, f, prev)
		wantSwap(t, st, "bravo", "standby-1")
		if r := decisionReason(t, st, status.GateConnected, ""); !r.OK {
			t.Fatalf("gate_connected: %+v", r)
		}
	})
	t.Run("cut by its connects, before the swap", func(t *testing.T) {
		f := votersFleet(t, 3)
		f.slowHost("bravo")
		cut(f)
		st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
		wantNone(t, st, status.GateConnected)
	})
	t.Run("its record unwritten, after the swap", func(t *testing.T) {
		f := votersFleet(t, 3)
		f.slowHost("bravo")
		prev := published(t, f)
		stale(t, f, prev, "bravo")
		st := next(t, f, prev)
		wantVerdict(t, st, "bravo", status.Unknown)
		wantSwap(t, st, "bravo", "standby-1")
		if r := decisionReason(t, st, status.GateReported, "bravo"); !r.OK || !strings.Contains(r.Detail, "bravo is the voter the swap published at the previous decision removes: not held for") {
			t.Fatalf("gate_reported: %+v", r)
		}
	})
	t.Run("another voter's record unwritten, after the swap", func(t *testing.T) {
		f := votersFleet(t, 3)
		f.slowHost("bravo")
		prev := published(t, f)
		stale(t, f, prev, "charlie")
		st := next(t, f, prev)
		wantNone(t, st, status.GateReported)
		if r := decisionReason(t, st, status.GateReported, "charlie"); r.OK {
			t.Fatalf("gate_reported: %+v", r)
		}
	})
}
