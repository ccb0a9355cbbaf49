package decide

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// These tests read the decision's typed state, which the status shows only
// as words: the link matrix and the judgements it holds against each end.

var linkNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// linkFleet is three voters (alpha, bravo, charlie) and a standby (delta),
// each with a full, fresh window; slow[from][to] is from's connect time to
// to in seconds (1 ms where unset; +Inf, a refused connect), and a voter's etcd measures a 2 ms
// round trip to each other member.
func linkFleet(t *testing.T, s settings.Settings, slow map[string]map[string]float64) Input {
	t.Helper()
	voters := []string{"alpha", "bravo", "charlie"}
	id := func(n string) string { return map[string]string{"alpha": "a1", "bravo": "b2", "charlie": "c3"}[n] }
	in := Input{Now: linkNow, Settings: s, Entries: map[string]string{}}
	rtt := quantile.Histogram{Bounds: []float64{0.001, 0.002, 0.004}, Counts: []uint64{0, 1, 0, 0}}
	disk := quantile.Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{100, 0, 0}}
	for _, name := range append(voters[:3:3], "delta") {
		voter := name != "delta"
		in.Nodes = append(in.Nodes, k3snode.Node{Name: name, Voter: voter, Eligible: true, EligibleMarked: true})
		e := entry.Entry{Node: name}
		for i := range s.Window {
			stall := 0.001
			x := entry.Sample{At: linkNow.Add(-time.Duration(s.Window-i) * s.SamplePeriod), Link: entry.Link{Interface: "eth0", Class: entry.ClassWired},
				Connect: map[string]entry.Connect{}, MemTotalBytes: 16 << 30, MemAvailableBytes: 9 << 30, MemFullStallSeconds: &stall}
			for _, v := range voters {
				if v != name {
					c := 0.001
					if d, ok := slow[name][v]; ok {
						c = d
					}
					x.Connect[v] = entry.Connect{Seconds: c}
					if math.IsInf(c, 1) {
						x.Connect[v] = entry.Connect{Err: "dial tcp: connect: connection refused"}
					}
				}
			}
			if voter {
				x.Etcd = &entry.EtcdSample{MemberID: id(name), HasLeader: true, ConnectedPeers: 2, KnownPeers: 2,
					WALFsync: disk, BackendCommit: disk, PeerRTT: map[string]quantile.Histogram{}}
				for _, v := range voters {
					if v != name {
						x.Etcd.PeerRTT[id(v)] = rtt
					}
				}
			}
			entry.Append(&e, x, s.Window)
		}
		if !voter {
			e.Fsync = &entry.FsyncReading{At: linkNow.Add(-time.Hour), Dir: "/var/lib/fr", Filesystem: "ext4", MeasuredDisk: true,
				Writes: 1000, P99Seconds: 0.002, MaxSeconds: 0.004}
		}
		raw, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		in.Entries[name] = raw
	}
	return in
}

// One end measures a link slow and the other measures it fit: the matrix
// keeps both ends' figures (the tail, the connects over the limit, etcd's
// round trip), and the slow end's measurement is held against the other
// end too, as a judgement from that end, not one of its own.
func TestLinkMatrixKeepsBothEnds(t *testing.T) {
	s := settings.Defaults()
	a := assess(linkFleet(t, s, map[string]map[string]float64{"alpha": {"bravo": 0.4}, "delta": {"charlie": 0.4}}))
	limit := s.ConnectLimit().Value

	ab, ba := a.links.at("alpha", "bravo"), a.links.at("bravo", "alpha")
	if ab == nil || ba == nil || ab.connect == nil || ba.connect == nil || ab.rtt == nil || ba.rtt == nil {
		t.Fatalf("alpha-bravo ends: %+v %+v", ab, ba)
	}
	if !ab.slow(kindConnect) || ab.connect.value != 0.4 || ab.connect.over != s.Window || ab.connect.count != s.Window || !ab.judged {
		t.Fatalf("alpha's end: slow %v, tail %v, %d of %d over %v", ab.slow(kindConnect), ab.connect.value, ab.connect.over, ab.connect.count, limit)
	}
	if ba.slowAny() || ba.connect.value != 0.001 || ba.connect.over != 0 {
		t.Fatalf("bravo's end: slow %v, tail %v, %d over", ba.slowAny(), ba.connect.value, ba.connect.over)
	}
	if ab.rtt.out != pass || !ab.rtt.measured || ab.rtt.value <= 0.001 || ab.rtt.value > 0.002 {
		t.Fatalf("alpha's round trip to bravo: %+v", *ab.rtt)
	}

	// Held against bravo as alpha's measurement: bravo is unfit and names
	// alpha, though its own figures are fit.
	bravo := a.byName["bravo"]
	if bravo.verdict != status.Unfit {
		t.Fatalf("bravo is %s", bravo.verdict)
	}
	var got []judgement
	for _, g := range bravo.all {
		if g.from != nil {
			got = append(got, g)
		}
	}
	if len(got) != 1 || got[0].subject != "alpha" || got[0].from != ab.connect || got[0].out != fail || got[0].held {
		t.Fatalf("bravo's judgements from other ends: %+v", got)
	}
	for _, g := range bravo.own {
		if g.out != pass {
			t.Fatalf("bravo's own %s fails", signalOf[g.kind])
		}
	}
	r := got[0].reason(a.j, "bravo")
	if r.OK || r.Subject != "alpha" || !strings.HasPrefix(r.Detail, "measured by alpha: ") || *r.Value != 0.4 {
		t.Fatalf("bravo's reason from alpha: %+v", r)
	}

	// A standby's slow link to a voter: named on the voter, held only
	// against the standby.
	dc := a.links.at("delta", "charlie")
	if dc == nil || !dc.slow(kindConnect) || dc.rtt != nil {
		t.Fatalf("delta's end: %+v", dc)
	}
	charlie := a.byName["charlie"]
	if charlie.verdict != status.Fit || a.byName["delta"].verdict != status.Unfit {
		t.Fatalf("charlie %s, delta %s", charlie.verdict, a.byName["delta"].verdict)
	}
	held := 0
	for _, g := range charlie.all {
		if g.from == dc.connect && g.held && g.out == pass && g.subject == "delta" {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("charlie's judgements: %+v", charlie.all)
	}
	// Every end is in the matrix once, from both sides: three voters
	// measure two others each; the standby measures three.
	n := 0
	for _, ends := range a.links.from {
		n += len(ends)
	}
	if n != 3*2+3 || len(a.links.into["charlie"]) != 3 || len(a.links.into["delta"]) != 0 {
		t.Fatalf("%d ends, %d into charlie, %d into delta", n, len(a.links.into["charlie"]), len(a.links.into["delta"]))
	}
}

// A failed tail keeps its figure as +Inf with its count of failures: the
// matrix says how the end failed, the reason says "failed".
func TestLinkMatrixFailedTail(t *testing.T) {
	s := settings.Defaults()
	a := assess(linkFleet(t, s, map[string]map[string]float64{"alpha": {"bravo": math.Inf(1)}}))
	ab := a.links.at("alpha", "bravo")
	if ab == nil || !ab.slow(kindConnect) || !math.IsInf(ab.connect.value, 1) || ab.connect.measured {
		t.Fatalf("alpha's end: %+v", ab)
	}
	if ab.connect.failed != s.Window || ab.connect.over != s.Window {
		t.Fatalf("alpha's end: %d failed, %d over", ab.connect.failed, ab.connect.over)
	}
	r := ab.connect.reason(a.j, "alpha")
	if r.Value != nil || r.Limit == nil || !strings.Contains(r.Detail, "peer port: failed; 100 of 100 failed, the latest: dial tcp") {
		t.Fatalf("alpha's reason: %+v", r)
	}
}

// The status publishes the matrix as each measuring host measured it: a
// row per host, a cell per peer by name; a slow link slow on the end that
// measured it and not on the other; a failed tail with no seconds and its
// failures; a reading of etcd that could not be merged neither ok nor
// slow; a standby's row with no round trip.
func TestPublishedLinks(t *testing.T) {
	s := settings.Defaults()
	a := assess(linkFleet(t, s, map[string]map[string]float64{"alpha": {"bravo": 0.4, "charlie": math.Inf(1)}}))
	// charlie's round trip to alpha, as if its histograms had not merged.
	a.links.at("charlie", "alpha").rtt.out, a.links.at("charlie", "alpha").rtt.unmerged = unknown, &unmerged{count: 3, err: "x"}
	rows := a.links.published(a.hosts)
	var from []string
	cells := map[string]status.LinkCell{}
	for _, r := range rows {
		from = append(from, r.From)
		var peers []string
		for _, c := range r.To {
			peers = append(peers, c.Peer)
			cells[r.From+">"+c.Peer] = c
		}
		if !slices.IsSorted(peers) {
			t.Errorf("%s's cells not by peer: %q", r.From, peers)
		}
	}
	if strings.Join(from, ",") != "alpha,bravo,charlie,delta" || len(cells) != 3*2+3 {
		t.Fatalf("rows %q, %d cells", from, len(cells))
	}
	n := s.Window
	ab, ba, ac, ca, dc := cells["alpha>bravo"], cells["bravo>alpha"], cells["alpha>charlie"], cells["charlie>alpha"], cells["delta>charlie"]
	if !ab.Slow || *ab.Connect.Seconds != 0.4 || ab.Connect.Over != n || ab.Connect.Count != n || ab.Connect.Failed != 0 || ab.Connect.OK ||
		ab.RTT == nil || !ab.RTT.OK || ab.RTT.Count != n {
		t.Errorf("alpha to bravo: %+v %+v %+v", ab, ab.Connect, ab.RTT)
	}
	if ba.Slow || *ba.Connect.Seconds != 0.001 || ba.Connect.Over != 0 || !ba.Connect.OK {
		t.Errorf("bravo to alpha: %+v %+v", ba, ba.Connect)
	}
	if !ac.Slow || ac.Connect.Seconds != nil || ac.Connect.Failed != n || ac.Connect.Over != n || ac.Connect.OK {
		t.Errorf("alpha to charlie, failing: %+v %+v", ac, ac.Connect)
	}
	if ca.Slow || ca.RTT.OK || ca.RTT.Unmerged != 3 || ca.RTT.Seconds == nil || !ca.Connect.OK {
		t.Errorf("charlie to alpha, unmerged: %+v %+v", ca, ca.RTT)
	}
	if dc.RTT != nil || dc.Connect == nil || dc.Slow {
		t.Errorf("delta to charlie: %+v", dc)
	}
	// The figures are copies: the status outlives the judgements.
	*ab.Connect.Seconds = 1
	if a.links.at("alpha", "bravo").connect.value != 0.4 {
		t.Error("the published tail is the judgement's own figure")
	}
}

// A histogram that cannot be merged with the window's makes its signal
// unknown, with the cause in its reason: a tail of part of the window is
// not judged as the whole's.
func TestFailedMergeIsAReason(t *testing.T) {
	s := settings.Defaults()
	j := limitsOf(s, linkNow)
	ok := quantile.Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{100, 0, 0}}
	other := quantile.Histogram{Bounds: []float64{0.001, 0.004}, Counts: []uint64{0, 0, 100}}
	var window []entry.Sample
	for i := range 4 {
		x := &entry.EtcdSample{MemberID: "a1", HasLeader: true, WALFsync: ok, BackendCommit: ok,
			PeerRTT: map[string]quantile.Histogram{"b2": ok}}
		if i == 2 {
			x.WALFsync, x.PeerRTT["b2"] = other, other
		}
		window = append(window, entry.Sample{Etcd: x})
	}
	h := &host{node: k3snode.Node{Name: "alpha"}, role: status.RoleVoter, window: window}
	gs := h.etcdSignals(j, map[string]string{"a1": "alpha", "b2": "bravo"}, nil)
	seen := map[kind]bool{}
	for _, g := range gs {
		seen[g.kind] = true
		r := g.reason(j, "alpha")
		switch g.kind {
		case kindWALFsync, kindPeerRTT:
			if g.out != unknown || g.unmerged == nil || g.unmerged.count != 1 || !strings.Contains(r.Detail, "1 of the window's histograms could not be merged") ||
				!strings.Contains(r.Detail, "merge histograms: bound 1 is 0.002 and 0.004") || r.OK {
				t.Errorf("%s: %+v", r.Signal, r)
			}
			if r.Value == nil || *r.Value > 0.001 {
				t.Errorf("%s keeps its figure of the merged samples: %v", r.Signal, deref(r.Value))
			}
		case kindBackendCommit:
			if g.out != pass || g.unmerged != nil {
				t.Errorf("%s: %+v", r.Signal, r)
			}
		}
	}
	if !seen[kindWALFsync] || !seen[kindPeerRTT] || !seen[kindBackendCommit] {
		t.Fatalf("judgements: %+v", gs)
	}
	if v := verdictOf(gs); v != status.Unknown {
		t.Fatalf("verdict %s, want unknown", v)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
