package etcdmetrics

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The member IDs of the captured cluster (see each page's first line).
const (
	idLeader   = "c257a8e496d01bb7" // etcd-2
	idFollower = "aedb94a1956af3cc" // etcd-1, the follower of every follower page
	idThird    = "9bfeb49a8a2e8d0d" // etcd-3
	idLearner  = "4214c013e617024f" // etcd-4, added as a learner, later removed
)

func page(t testing.TB, name string) *Snapshot {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("# etcd v3.6.15, ")) {
		t.Fatalf("%s: first line does not say the version and how it was captured", name)
	}
	s, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// The cumulative counts of the 14 finite buckets (0.001 s to 8.192 s) and
// +Inf, read off follower.prom.
var (
	diskBounds          = []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192}
	followerWAL         = []uint64{5024, 5060, 5069, 5074, 5076, 5076, 5076, 5076, 5076, 5076, 5076, 5076, 5076, 5076, 5076}
	followerCommit      = []uint64{540, 585, 593, 597, 598, 598, 598, 598, 598, 598, 598, 598, 598, 598, 598}
	rttBounds           = []float64{0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048, 0.4096, 0.8192, 1.6384, 3.2768}
	followerRTTToThird  = []uint64{1, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}
	followerStartSecond = 1.79597825043e+09
)

func TestParseFollower(t *testing.T) {
	s := page(t, "follower.prom")
	if s.MemberID != idFollower {
		t.Errorf("member ID %q, want %s", s.MemberID, idFollower)
	}
	if s.IsLeader || s.IsLearner || !s.HasLeader {
		t.Errorf("leader %v learner %v has leader %v, want false false true", s.IsLeader, s.IsLearner, s.HasLeader)
	}
	if want := map[string]float64{idLeader: 1, idThird: 1}; !reflect.DeepEqual(s.ActivePeers, want) {
		t.Errorf("active peers %v, want %v", s.ActivePeers, want)
	}
	if want := []string{idThird, idLeader}; !reflect.DeepEqual(s.KnownPeers, want) {
		t.Errorf("known peers %v, want %v (itself excluded)", s.KnownPeers, want)
	}
	if s.LeaderChanges != 1 {
		t.Errorf("leader changes %g, want 1 (the first election counts)", s.LeaderChanges)
	}
	if s.DBSizeBytes != 1961984 || s.QuotaBytes != 2147483648 {
		t.Errorf("db %d quota %d, want 1961984 and 2147483648", s.DBSizeBytes, s.QuotaBytes)
	}
	if s.ProcessStart != followerStartSecond {
		t.Errorf("process start %g, want %g", s.ProcessStart, followerStartSecond)
	}
	want := Cumulative{Bounds: diskBounds, Counts: followerWAL, Sum: 1.9582336520000043}
	if !reflect.DeepEqual(s.WALFsync, want) {
		t.Errorf("WAL fsync %+v, want %+v", s.WALFsync, want)
	}
	want = Cumulative{Bounds: diskBounds, Counts: followerCommit, Sum: 0.43240307700000064}
	if !reflect.DeepEqual(s.BackendCommit, want) {
		t.Errorf("backend commit %+v, want %+v", s.BackendCommit, want)
	}
	if len(s.PeerRTT) != 2 {
		t.Fatalf("peer RTT for %d peers, want 2", len(s.PeerRTT))
	}
	want = Cumulative{Bounds: rttBounds, Counts: followerRTTToThird, Sum: 0.0007712000000000001}
	if !reflect.DeepEqual(s.PeerRTT[idThird], want) {
		t.Errorf("peer RTT to %s %+v, want %+v", idThird, s.PeerRTT[idThird], want)
	}
	if c := s.PeerRTT[idLeader].Count(); c != 4 {
		t.Errorf("peer RTT count to the leader %d, want 4", c)
	}
}

func TestParseLeader(t *testing.T) {
	s := page(t, "leader.prom")
	if s.MemberID != idLeader || !s.IsLeader || s.IsLearner || !s.HasLeader {
		t.Errorf("got %s leader %v learner %v has leader %v, want %s true false true", s.MemberID, s.IsLeader, s.IsLearner, s.HasLeader, idLeader)
	}
	if want := []string{idThird, idFollower}; !reflect.DeepEqual(s.KnownPeers, want) {
		t.Errorf("known peers %v, want %v", s.KnownPeers, want)
	}
	if s.WALFsync.Count() != 5076 || s.WALFsync.Counts[0] != 5014 || s.WALFsync.Counts[1] != 5059 {
		t.Errorf("WAL fsync count %d, first buckets %v, want 5076, 5014, 5059", s.WALFsync.Count(), s.WALFsync.Counts[:2])
	}
	r := Gained(nil, s)
	if r.ConnectedPeers != 2 || r.KnownPeers != 2 {
		t.Errorf("connected %d known %d, want 2 and 2", r.ConnectedPeers, r.KnownPeers)
	}
	if want := []string{idThird, idFollower}; !reflect.DeepEqual(r.Peers(), want) {
		t.Errorf("peer RTT keyed by %v, want %v", r.Peers(), want)
	}
}

func TestParseLearner(t *testing.T) {
	s := page(t, "learner.prom")
	if s.MemberID != idLearner || s.IsLeader || !s.IsLearner || !s.HasLeader {
		t.Errorf("got %s leader %v learner %v has leader %v, want %s false true true", s.MemberID, s.IsLeader, s.IsLearner, s.HasLeader, idLearner)
	}
	r := Gained(nil, s)
	// A learner connects to all three voters.
	if r.ConnectedPeers != 3 || r.KnownPeers != 3 {
		t.Errorf("connected %d known %d, want 3 and 3", r.ConnectedPeers, r.KnownPeers)
	}
	if r.WALFsync.Count != 1417 || r.BackendCommit.Count != 174 || r.DBSizeBytes != 2830336 {
		t.Errorf("WAL %d commit %d db %d, want 1417, 174, 2830336", r.WALFsync.Count, r.BackendCommit.Count, r.DBSizeBytes)
	}
}

func TestConnectedPeersCountsDistinctRemotes(t *testing.T) {
	s := page(t, "follower-active-peers-2.prom")
	if s.ActivePeers[idThird] != 2 {
		t.Fatalf("edited page reads %g for %s, want 2", s.ActivePeers[idThird], idThird)
	}
	r := Gained(nil, s)
	// The sum of the gauges is 3; the member has two peers.
	if r.ConnectedPeers != 2 {
		t.Errorf("connected peers %d, want 2 (distinct Remote, not the sum 3)", r.ConnectedPeers)
	}
	if r.KnownPeers != 2 {
		t.Errorf("known peers %d, want 2", r.KnownPeers)
	}
}

func TestGainedDelta(t *testing.T) {
	prev, cur := page(t, "delta-1.prom"), page(t, "delta-2.prom")
	prev.Time = time.Unix(1000, 0)
	cur.Time = prev.Time.Add(10 * time.Second)
	r := Gained(prev, cur)
	if r.Restarted || r.FromStart {
		t.Errorf("restarted %v from start %v, want false false", r.Restarted, r.FromStart)
	}
	if r.IntervalSeconds != 10 {
		t.Errorf("interval %g s, want 10", r.IntervalSeconds)
	}
	// WAL fsync: cumulative 5024..5077 before, 5878..5933 after.
	wantCounts := []uint64{854, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if r.WALFsync.Count != 856 || !reflect.DeepEqual(r.WALFsync.Histogram.Counts, wantCounts) || !reflect.DeepEqual(r.WALFsync.Histogram.Bounds, diskBounds) {
		t.Errorf("WAL fsync gained %d in %v, want 856 in %v", r.WALFsync.Count, r.WALFsync.Histogram.Counts, wantCounts)
	}
	if err := r.WALFsync.Histogram.Validate(); err != nil {
		t.Error(err)
	}
	// Rank 0.99*856 = 847.44 falls in the first bucket (854 of them).
	if p := r.WALFsync.P99Seconds; p == nil || math.Abs(*p-0.001*847.44/854) > 1e-12 {
		t.Errorf("WAL fsync p99 %v, want %g", p, 0.001*847.44/854)
	}
	if got := r.WALFsync.SumSeconds; math.Abs(got-(2.2448406290000062-1.9599245530000042)) > 1e-12 {
		t.Errorf("WAL fsync sum gained %g", got)
	}
	if r.BackendCommit.Count != 99 {
		t.Errorf("backend commit gained %d, want 99 (697-598)", r.BackendCommit.Count)
	}
	if r.LeaderChanges != 0 {
		t.Errorf("leader changes %d, want 0", r.LeaderChanges)
	}
	// Peer RTT to the leader: cumulative 2,2,4,4,... before, 2,2,5,6,...
	// after: one observation in (0.0002, 0.0004], one in (0.0004, 0.0008].
	g, ok := r.PeerRTT[idLeader]
	if !ok {
		t.Fatalf("no peer RTT for %s in %v", idLeader, r.Peers())
	}
	if g.Count != 2 || g.Histogram.Counts[2] != 1 || g.Histogram.Counts[3] != 1 {
		t.Errorf("peer RTT gained %d in %v, want 2, one each in buckets 2 and 3", g.Count, g.Histogram.Counts)
	}
	// Rank 1.98 lands in the 0.0008 bucket: 0.0004 + 0.0004*(0.98/1).
	if g.P99Seconds == nil || math.Abs(*g.P99Seconds-0.000792) > 1e-12 {
		t.Errorf("peer RTT p99 %v, want 0.000792", g.P99Seconds)
	}
	if r.ConnectedPeers != 2 || r.KnownPeers != 2 || r.DBSizeBytes != 2289664 {
		t.Errorf("connected %d known %d db %d, want 2 2 2289664", r.ConnectedPeers, r.KnownPeers, r.DBSizeBytes)
	}
}

func TestGainedAcrossRestart(t *testing.T) {
	before, after := page(t, "restart-before.prom"), page(t, "restart-after.prom")
	if before.MemberID != after.MemberID {
		t.Fatalf("pair is of two members: %s and %s", before.MemberID, after.MemberID)
	}
	r := Gained(before, after)
	if !r.Restarted || !r.FromStart {
		t.Fatalf("restarted %v from start %v, want true true", r.Restarted, r.FromStart)
	}
	// Counted from the restart: the new page's totals, never 902-7438.
	if r.WALFsync.Count != 902 || r.BackendCommit.Count != 113 {
		t.Errorf("WAL %d commit %d, want 902 and 113", r.WALFsync.Count, r.BackendCommit.Count)
	}
	if r.WALFsync.Histogram.Counts[0] != 868 || r.WALFsync.Histogram.Counts[1] != 895-868 {
		t.Errorf("WAL buckets %v, want 868 and 27 first", r.WALFsync.Histogram.Counts[:2])
	}
	// leader_changes_seen_total reads 1 on both pages: without the start
	// time, the restart would hide the new process's election.
	if r.LeaderChanges != 1 {
		t.Errorf("leader changes %d, want 1", r.LeaderChanges)
	}
	for id, g := range r.PeerRTT {
		if g.Count != 2 {
			t.Errorf("peer RTT to %s gained %d, want 2", id, g.Count)
		}
	}
}

func TestRemovedMemberIsNoPeer(t *testing.T) {
	// restart-before.prom was taken after the learner was removed: its
	// active_peers and known_peers read 0, its RTT series stays on the
	// page, and the parse leaves it out.
	raw, err := os.ReadFile(filepath.Join("testdata", "restart-before.prom"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(metricPeerRTT+`_count{To="`+idLearner+`"}`)) {
		t.Fatalf("page has no RTT series for the removed %s; the test needs one", idLearner)
	}
	s := page(t, "restart-before.prom")
	if _, ok := s.PeerRTT[idLearner]; ok {
		t.Errorf("the removed %s's RTT series was parsed", idLearner)
	}
	r := Gained(nil, s)
	if r.ConnectedPeers != 2 || r.KnownPeers != 2 {
		t.Errorf("connected %d known %d, want 2 and 2", r.ConnectedPeers, r.KnownPeers)
	}
	if want := []string{idThird, idLeader}; !reflect.DeepEqual(r.Peers(), want) {
		t.Errorf("peer RTT for %v, want %v (the removed learner left out)", r.Peers(), want)
	}
}

func TestGainedWithoutBaseline(t *testing.T) {
	s := page(t, "follower.prom")
	r := Gained(nil, s)
	if !r.FromStart || r.Restarted || r.IntervalSeconds != 0 {
		t.Errorf("from start %v restarted %v interval %g, want true false 0", r.FromStart, r.Restarted, r.IntervalSeconds)
	}
	if r.WALFsync.Count != 5076 || r.LeaderChanges != 1 || r.MemberID != idFollower {
		t.Errorf("WAL %d leader changes %d member %s", r.WALFsync.Count, r.LeaderChanges, r.MemberID)
	}
	r = Gained(s, s)
	if r.WALFsync.Count != 0 || r.WALFsync.P99Seconds != nil || r.LeaderChanges != 0 || r.FromStart {
		t.Errorf("a page against itself gained WAL %d p99 %v leader changes %d from start %v", r.WALFsync.Count, r.WALFsync.P99Seconds, r.LeaderChanges, r.FromStart)
	}
}

// A counter that goes down without a visible start time (a page that lacks
// process_start_time_seconds) is a restart too; each kind is checked at
// one less than before, equal, and one more.
func TestCounterDownIsRestart(t *testing.T) {
	base := func() *Snapshot {
		return &Snapshot{
			LeaderChanges: 3,
			WALFsync:      Cumulative{Bounds: []float64{0.001, 0.002}, Counts: []uint64{5, 8, 10}},
			BackendCommit: Cumulative{Bounds: []float64{0.001}, Counts: []uint64{4, 4}},
			PeerRTT:       map[string]Cumulative{"a": {Bounds: []float64{0.1}, Counts: []uint64{2, 2}}},
		}
	}
	cases := []struct {
		name    string
		edit    func(s *Snapshot)
		restart bool
	}{
		{"same", func(*Snapshot) {}, false},
		{"leader changes one less", func(s *Snapshot) { s.LeaderChanges = 2 }, true},
		{"leader changes one more", func(s *Snapshot) { s.LeaderChanges = 4 }, false},
		{"WAL total one less", func(s *Snapshot) { s.WALFsync.Counts = []uint64{5, 8, 9} }, true},
		{"WAL total one more", func(s *Snapshot) { s.WALFsync.Counts = []uint64{5, 8, 11} }, false},
		{"WAL bucket one less, total more", func(s *Snapshot) { s.WALFsync.Counts = []uint64{4, 8, 20} }, true},
		{"commit total one less", func(s *Snapshot) { s.BackendCommit.Counts = []uint64{3, 3} }, true},
		{"peer RTT one less", func(s *Snapshot) { s.PeerRTT["a"] = Cumulative{Bounds: []float64{0.1}, Counts: []uint64{1, 1}} }, true},
		{"other member ID", func(s *Snapshot) { s.MemberID = "b" }, true},
		{"other start time", func(s *Snapshot) { s.ProcessStart = 2 }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prev, cur := base(), base()
			prev.MemberID, cur.MemberID = "a1", "a1"
			prev.ProcessStart, cur.ProcessStart = 1, 1
			c.edit(cur)
			r := Gained(prev, cur)
			if r.Restarted != c.restart {
				t.Fatalf("restarted %v, want %v", r.Restarted, c.restart)
			}
			if c.restart && (r.WALFsync.Count != cur.WALFsync.Count() || r.LeaderChanges != uint64(cur.LeaderChanges)) {
				t.Errorf("after a restart WAL %d leader changes %d, want the new totals %d and %g", r.WALFsync.Count, r.LeaderChanges, cur.WALFsync.Count(), cur.LeaderChanges)
			}
		})
	}
}

// A peer that appears between scrapes counts from zero; one that has no RTT
// series yet is absent.
func TestPeerAppears(t *testing.T) {
	h := Cumulative{Bounds: []float64{0.1}, Counts: []uint64{3, 3}}
	prev := &Snapshot{KnownPeers: []string{"a", "b"}, PeerRTT: map[string]Cumulative{"a": h}}
	cur := &Snapshot{KnownPeers: []string{"a", "b"}, PeerRTT: map[string]Cumulative{"a": h, "b": h}}
	r := Gained(prev, cur)
	if r.Restarted || r.PeerRTT["a"].Count != 0 || r.PeerRTT["b"].Count != 3 {
		t.Errorf("restarted %v, a gained %d, b gained %d; want false 0 3", r.Restarted, r.PeerRTT["a"].Count, r.PeerRTT["b"].Count)
	}
}

func TestParseErrors(t *testing.T) {
	for name, text := range map[string]string{
		"not prometheus":       "<html>hello</html>\n",
		"bounds not ascending": "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n# TYPE etcd_disk_wal_fsync_duration_seconds histogram\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.002\"} 1\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 2\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 2\netcd_disk_wal_fsync_duration_seconds_count 2\netcd_disk_wal_fsync_duration_seconds_sum 0\n",
		"counts falling":       "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n# TYPE etcd_disk_wal_fsync_duration_seconds histogram\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 3\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.002\"} 2\netcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 3\netcd_disk_wal_fsync_duration_seconds_count 3\netcd_disk_wal_fsync_duration_seconds_sum 0\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err == nil || errors.Is(err, ErrNoData) {
			t.Errorf("%s: err %v, want a parse error", name, err)
		}
	}
	_, err := Parse(strings.NewReader("# TYPE go_goroutines gauge\ngo_goroutines 7\n"))
	if !errors.Is(err, ErrNoData) {
		t.Errorf("a page without etcd metrics: %v, want ErrNoData", err)
	}
}

var fuzzSeries = []string{metricServerID, metricHasLeader, metricIsLeader, metricLeaderChanges, metricActivePeers, metricKnownPeers, metricWALFsync, metricPeerRTT, metricProcessStart}

// fuzzing reports a run with -fuzz (not one of the seed corpus as tests).
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed pages: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// A whole page is 170 KB: as a seed it runs as an ordinary test,
		// but under -fuzz the engine spends minutes minimising every
		// interesting mutation of it. Its series of interest alone make a
		// small seed of the same shape, which the fuzzer mutates quickly.
		if !fuzzing() {
			f.Add(b)
		}
		var small []byte
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			for _, prefix := range fuzzSeries {
				if bytes.HasPrefix(line, []byte(prefix)) || bytes.HasPrefix(line, []byte("# TYPE "+prefix)) {
					small = append(small, line...)
					break
				}
			}
		}
		f.Add(small)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(bytes.NewReader(b))
		if err != nil {
			if len(err.Error()) > 2*maxErrorText {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(s.KnownPeers) > MaxPeers || len(s.MemberID) > maxIDDigits {
			t.Fatalf("known peers %d, member ID of %d bytes", len(s.KnownPeers), len(s.MemberID))
		}
		for _, r := range []Reading{Gained(nil, s), Gained(s, s)} {
			for name, g := range map[string]Gain{"wal": r.WALFsync, "commit": r.BackendCommit} {
				if len(g.Histogram.Counts) > 0 {
					if err := g.Histogram.Validate(); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				if g.Count != g.Histogram.Count() {
					t.Fatalf("%s count %d, buckets hold %d", name, g.Count, g.Histogram.Count())
				}
				if g.P99Seconds != nil && (math.IsNaN(*g.P99Seconds) || *g.P99Seconds < 0) {
					t.Fatalf("%s p99 %g", name, *g.P99Seconds)
				}
			}
			if r.ConnectedPeers > len(s.ActivePeers) {
				t.Fatalf("%d connected of %d pairs", r.ConnectedPeers, len(s.ActivePeers))
			}
		}
		if r := Gained(s, s); r.WALFsync.Count != 0 || r.BackendCommit.Count != 0 || r.Restarted {
			t.Fatalf("a page against itself gained %d and %d, restarted %v", r.WALFsync.Count, r.BackendCommit.Count, r.Restarted)
		}
	})
}
