package etcdmetrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

func startCluster(t *testing.T) *etcdproc.Cluster {
	t.Helper()
	c, err := etcdproc.Start(context.Background(), etcdproc.Config{Binary: testenv.Etcd(t), Dir: t.TempDir(), Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The reading of every member of a live three-process cluster under writes.
func TestLiveCluster(t *testing.T) {
	c := startCluster(t)
	ids := map[string]string{} // member ID -> name
	for _, m := range c.Members {
		ids[m.ID] = m.Name
	}
	first := map[string]*etcdmetrics.Snapshot{}
	for _, m := range c.Members {
		s, err := etcdmetrics.Scrape(ctxFor(t, etcdmetrics.DefaultTimeout), nil, m.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		first[m.Name] = s
	}
	if err := c.Put(ctxFor(t, time.Minute), 50); err != nil {
		t.Fatal(err)
	}
	leaders := 0
	followerFsyncs := uint64(0)
	for _, m := range c.Members {
		s, err := etcdmetrics.Scrape(ctxFor(t, etcdmetrics.DefaultTimeout), nil, m.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		r := etcdmetrics.Gained(first[m.Name], s)
		t.Logf("%s: %+v", m.Name, r)
		if r.MemberID != m.ID {
			t.Errorf("%s: member ID %s, want %s", m.Name, r.MemberID, m.ID)
		}
		if r.IsLeader {
			leaders++
		}
		if !r.HasLeader || r.IsLearner {
			t.Errorf("%s: has leader %v learner %v", m.Name, r.HasLeader, r.IsLearner)
		}
		if r.ConnectedPeers != 2 || r.KnownPeers != 2 {
			t.Errorf("%s: connected %d known %d, want 2 and 2", m.Name, r.ConnectedPeers, r.KnownPeers)
		}
		// 50 writes, one after another (each waits for its commit). etcd
		// fsyncs its WAL once per raft Ready that holds entries, and a
		// member that lags can take two entries in one Ready, one fsync:
		// on a busy machine a follower gains fewer than 50. The leader
		// cannot: write N+1 is proposed only once N is committed, so
		// each of its Readies holds one new entry. Nor can the two
		// followers together: N commits on the ack of a follower that
		// persisted N in a Ready of its own, N+1 not yet proposed.
		if r.WALFsync.Count == 0 || r.WALFsync.P99Seconds == nil {
			t.Errorf("%s: WAL fsync gained %d (p99 %v), want some", m.Name, r.WALFsync.Count, r.WALFsync.P99Seconds)
		}
		if r.IsLeader && r.WALFsync.Count < 50 {
			t.Errorf("%s, the leader: WAL fsync gained %d, want at least 50, one per write", m.Name, r.WALFsync.Count)
		}
		if !r.IsLeader {
			followerFsyncs += r.WALFsync.Count
		}
		if r.Restarted || r.FromStart || r.IntervalSeconds <= 0 {
			t.Errorf("%s: restarted %v from start %v interval %g", m.Name, r.Restarted, r.FromStart, r.IntervalSeconds)
		}
		if r.QuotaBytes != 2<<30 || r.DBSizeBytes <= 0 {
			t.Errorf("%s: quota %d db %d", m.Name, r.QuotaBytes, r.DBSizeBytes)
		}
	}
	if leaders != 1 {
		t.Errorf("%d leaders, want exactly 1", leaders)
	}
	if followerFsyncs < 50 {
		t.Errorf("the followers gained %d WAL fsyncs together, want at least 50, one per write", followerFsyncs)
	}

	// etcd feeds the peer round-trip histogram rarely: the first values
	// about 5 s after a peer appears (docs/facts.md). Poll until every member
	// has RTT from both others, keyed by their IDs.
	deadline := time.Now().Add(45 * time.Second)
	for _, m := range c.Members {
		var want []string
		for id := range ids {
			if id != m.ID {
				want = append(want, id)
			}
		}
		sort.Strings(want)
		for {
			s, err := etcdmetrics.Scrape(ctxFor(t, etcdmetrics.DefaultTimeout), nil, m.MetricsURL)
			if err != nil {
				t.Fatal(err)
			}
			r := etcdmetrics.Gained(nil, s)
			fed := 0
			for _, id := range want {
				if r.PeerRTT[id].Count > 0 {
					fed++
				}
			}
			if fed == len(want) && strings.Join(r.Peers(), ",") == strings.Join(want, ",") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: peer RTT for %v (%d fed), want fed for %v", m.Name, r.Peers(), fed, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// A paused member accepts the connection and never answers: the scrape
// must fail within its timeout, not hang.
func TestScrapePausedMember(t *testing.T) {
	c := startCluster(t)
	fs, err := c.Followers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := fs[0]
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Resume() })
	const timeout = 500 * time.Millisecond
	// The connection is accepted by the kernel on the paused member's
	// listening socket.
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimSuffix(m.MetricsURL, "/metrics"), "http://"), timeout)
	if err != nil {
		t.Fatalf("paused member's metrics port refused: %v", err)
	}
	conn.Close()

	began := time.Now()
	_, err = etcdmetrics.Scrape(ctxFor(t, timeout), nil, m.MetricsURL)
	took := time.Since(began)
	if err == nil {
		t.Fatal("scrape of a paused member succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), m.MetricsURL) {
		t.Errorf("error %v, want a deadline naming %s", err, m.MetricsURL)
	}
	// The bound is the timeout; the margin covers scheduling on a shared
	// 2-core machine.
	if took > timeout+time.Second {
		t.Errorf("scrape returned after %v, timeout %v", took, timeout)
	}

	// The client's own timeout bounds it the same way.
	_, err = etcdmetrics.Scrape(context.Background(), &http.Client{Timeout: timeout}, m.MetricsURL)
	if err == nil {
		t.Fatal("scrape with a client timeout succeeded against a paused member")
	}

	// With neither, etcdmetrics.DefaultTimeout bounds it.
	began = time.Now()
	_, err = etcdmetrics.Scrape(context.Background(), nil, m.MetricsURL)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("scrape with no deadline: %v, want etcdmetrics.DefaultTimeout to end it", err)
	}
	if took := time.Since(began); took < etcdmetrics.DefaultTimeout || took > etcdmetrics.DefaultTimeout+2*time.Second {
		t.Errorf("scrape with no deadline ended after %v, want about %v", took, etcdmetrics.DefaultTimeout)
	}

	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdmetrics.Scrape(ctxFor(t, etcdmetrics.DefaultTimeout), nil, m.MetricsURL); err != nil {
		t.Errorf("scrape after resume: %v", err)
	}
}
