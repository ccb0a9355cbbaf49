package etcdmetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostilePages serves what no etcd member serves, on loopback.
func hostilePages(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	leader, err := os.ReadFile(filepath.Join("testdata", "leader.prom"))
	if err != nil {
		t.Fatal(err)
	}
	huge := make([]byte, 16<<20)
	for i := range huge {
		huge[i] = '#'
		if i%64 == 63 {
			huge[i] = '\n'
		}
	}
	// A page whose series name n peers (and, with known, 2 known ones).
	peers := func(n int, family string, known bool) []byte {
		var b strings.Builder
		b.WriteString("# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n")
		if known {
			b.WriteString("etcd_network_known_peers{Local=\"c257a8e496d01bb7\",Remote=\"1\"} 1\n")
			b.WriteString("etcd_network_known_peers{Local=\"c257a8e496d01bb7\",Remote=\"2\"} 1\n")
		}
		b.WriteString("# TYPE " + family + " gauge\n")
		for i := range n {
			fmt.Fprintf(&b, "%s{Local=\"c257a8e496d01bb7\",Remote=\"%x\"} 1\n", family, 0x1000+i)
		}
		return []byte(b.String())
	}
	// The densest page the cap lets through: nothing but round-trip
	// histograms, every line kept for the parser, of as many removed
	// members as fit.
	var dense strings.Builder
	dense.WriteString("etcd_server_has_leader 1\netcd_network_known_peers{Remote=\"1000\"} 1\n# TYPE etcd_network_peer_round_trip_time_seconds histogram\n")
	for i := 0; dense.Len() < MaxPageBytes-2048; i++ {
		for _, le := range []string{"0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256", "0.0512", "0.1024", "0.2048", "0.4096", "0.8192", "1.6384", "3.2768", "+Inf"} {
			fmt.Fprintf(&dense, "etcd_network_peer_round_trip_time_seconds_bucket{To=\"%x\",le=\"%s\"} 1\n", 0x1000+i, le)
		}
		fmt.Fprintf(&dense, "etcd_network_peer_round_trip_time_seconds_sum{To=\"%x\"} 0.001\netcd_network_peer_round_trip_time_seconds_count{To=\"%x\"} 1\n", 0x1000+i, 0x1000+i)
	}
	pages := map[string][]byte{
		"/known-1000":     peers(1000, metricKnownPeers, false),
		"/known-7":        peers(MaxPeers+1, metricKnownPeers, false),
		"/known-6":        peers(MaxPeers, metricKnownPeers, false),
		"/active-1000":    peers(1000, metricActivePeers, true),
		"/dense":          []byte(dense.String()),
		"/label-10mb":     fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=%q} 1\n", strings.Repeat("a", 10<<20)),
		"/label-500kb":    fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=%q} 1\n", strings.Repeat("a", 500<<10)),
		"/known-100":      peers(100, metricKnownPeers, false),
		"/active-7":       peers(MaxPeers+1, metricActivePeers, false),
		"/label-60kb":     fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=%q} 1\n", strings.Repeat("a", 60<<10)),
		"/label-17":       fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=%q} 1\n", strings.Repeat("a", maxIDDigits+1)),
		"/label-16":       fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=%q} 1\n", strings.Repeat("a", maxIDDigits)),
		"/bad-token-60kb": fmt.Appendf(nil, "etcd_server_has_leader 1\netcd_server_id{server_id=\"%s\n", strings.Repeat("a", 60<<10)),
	}
	// As dense, of series the reading uses that name no peer: the WAL
	// fsync histogram, over and over with a label etcd never writes.
	var kept strings.Builder
	kept.WriteString("etcd_server_has_leader 1\n")
	for i := 0; kept.Len() < MaxPageBytes-2048; i++ {
		fmt.Fprintf(&kept, "etcd_disk_wal_fsync_duration_seconds_bucket{x=\"%d\",le=\"0.001\"} 1\n", i)
	}
	pages["/dense-kept"] = []byte(kept.String())
	if n := len(pages["/dense"]); n > MaxPageBytes {
		t.Fatalf("dense page of %d bytes, over the cap", n)
	}
	redirected := &atomic.Int64{}
	mux := http.NewServeMux()
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		w.Write(leader)
		line := []byte("# more\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		for i := 0; r.Context().Err() == nil; i++ {
			if _, err := w.Write(leader[i%len(leader) : i%len(leader)+1]); err != nil {
				return
			}
			f.Flush()
			time.Sleep(5 * time.Millisecond) // the trickle is the case under test
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(huge)))
		w.Write(huge)
	})
	mux.HandleFunc("/huge-chunked", func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i < len(huge); i += 64 << 10 {
			if _, err := w.Write(huge[i : i+64<<10]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		redirected.Add(1)
		w.Write(leader)
	})
	for path, page := range pages {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { w.Write(page) })
	}
	mux.HandleFunc("/header-1mb", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Pad", strings.Repeat("x", 1<<20))
		w.Write(leader)
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv, redirected
}

// Each hostile page ends the scrape within its deadline, with an error
// naming what was wrong, having allocated little.
func TestScrapeHostilePages(t *testing.T) {
	srv, redirected := hostilePages(t)
	const deadline = time.Second
	// The page's buffer, grown by doubling to MaxPageBytes+1 (under
	// 2 MiB in all), and the parse of at most MaxKeptBytes (about twenty
	// bytes allocated for each byte parsed).
	const allocBudget = 2*MaxPageBytes + 24*MaxKeptBytes
	for _, c := range []struct {
		path string
		want string // in the error; "" means the scrape succeeds
		is   error
	}{
		{"/endless", "larger than 1048576 bytes (MaxPageBytes)", nil},
		{"/trickle", "read page", context.DeadlineExceeded},
		{"/huge", "page of 16777216 bytes (Content-Length) larger than 1048576", nil},
		{"/huge-chunked", "larger than 1048576 bytes (MaxPageBytes)", nil},
		{"/redirect", "answered with a redirect to " + srv.URL + "/elsewhere", ErrRedirect},
		{"/known-1000", "more than 65536 (MaxKeptBytes)", nil},
		{"/known-100", "names 100 known peers", nil},
		{"/known-7", "names 7 known peers", nil},
		{"/known-6", "", nil},
		{"/dense", "", nil},
		{"/dense-kept", "more than 65536 (MaxKeptBytes)", nil},
		// Connected to 1,000 members that are not known: their series are
		// left out as removed members' are, and none counts.
		{"/active-1000", "", nil},
		{"/active-7", "names 7 known peers", nil},
		{"/label-10mb", "larger than 1048576 bytes (MaxPageBytes)", nil},
		{"/label-500kb", "more than 65536 (MaxKeptBytes)", nil},
		{"/label-60kb", "not an etcd member ID", nil},
		{"/label-17", "not an etcd member ID", nil},
		{"/label-16", "", nil},
		{"/bad-token-60kb", "parse metrics page", nil},
		{"/header-1mb", "server response headers exceeded", nil},
	} {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			began := time.Now()
			s, err := Scrape(ctx, nil, srv.URL+c.path)
			took := time.Since(began)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v in %v, %.1f MiB allocated", err, took.Round(time.Millisecond), float64(alloc)/(1<<20))
			if c.want == "" {
				if err != nil {
					t.Fatalf("err %v, want the page read", err)
				}
				r := Gained(nil, s)
				t.Logf("known peers %d, connected %d, round-trip series %d", r.KnownPeers, r.ConnectedPeers, len(s.PeerRTT))
				if r.KnownPeers > MaxPeers || r.ConnectedPeers > MaxPeers || len(s.PeerRTT) > MaxPeers {
					t.Errorf("known %d, connected %d, round trips to %d: over %d", r.KnownPeers, r.ConnectedPeers, len(s.PeerRTT), MaxPeers)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Errorf("err %v, want one saying %q (is %v)", err, c.want, c.is)
			}
			if err != nil && !strings.Contains(err.Error(), srv.URL+c.path) {
				t.Errorf("error %v does not name the URL", err)
			}
			// The error carries no page: its text stays near its
			// own few lines.
			if err != nil && len(err.Error()) > 2*maxErrorText {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			// The margin covers scheduling on a shared, loaded machine.
			if took > deadline+time.Second {
				t.Errorf("scrape took %v, deadline %v", took, deadline)
			}
			// The allocation counter is the whole process's: the test
			// server's own writes are in it too, which only errs on
			// the safe side.
			if alloc > allocBudget {
				t.Errorf("scrape allocated %.1f MiB, budget %.1f MiB", float64(alloc)/(1<<20), float64(allocBudget)/(1<<20))
			}
		})
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// The deadline just under and just over the time the member takes to
// answer, and a parse that finds its deadline gone returns no result.
func TestScrapeDeadline(t *testing.T) {
	leader, err := os.ReadFile(filepath.Join("testdata", "leader.prom"))
	if err != nil {
		t.Fatal(err)
	}
	// The member answers with the smallest page: what is timed is its
	// delay, not the parse (under the race detector on a loaded machine a
	// whole page's parse takes a good part of a second).
	const deadline = 2 * time.Second
	small := []byte("etcd_server_has_leader 1\n")
	delay := make(chan time.Duration, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the slow member is the case under test
		case <-time.After(<-delay):
		case <-r.Context().Done():
			return
		}
		w.Write(small)
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		delay time.Duration
		ok    bool
	}{{deadline * 6 / 10, true}, {deadline * 14 / 10, false}} {
		for _, viaClient := range []bool{false, true} {
			delay <- c.delay
			ctx, client := context.Background(), &http.Client{Timeout: deadline}
			if !viaClient {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
				client = nil
			}
			began := time.Now()
			_, err := Scrape(ctx, client, srv.URL)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("member answering after %v, deadline %v (client timeout: %v): %v, want ok %v", c.delay, deadline, viaClient, err, c.ok)
			}
			if took := time.Since(began); took > deadline+time.Second {
				t.Errorf("scrape took %v, deadline %v", took, deadline)
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := parse(ctx, leader); !errors.Is(err, context.Canceled) {
		t.Errorf("parse with its context done: %v, want it refused", err)
	}
}

// The page cap against the largest real page: a member of 7 with the
// series of many removed members still fits.
func TestMaxPageBytesCoversRealPages(t *testing.T) {
	pages, err := filepath.Glob("testdata/*.prom")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no captured pages: %v", err)
	}
	largest := 0
	for _, p := range pages {
		if fi, err := os.Stat(p); err == nil && int(fi.Size()) > largest {
			largest = int(fi.Size())
		}
	}
	// Each peer's series take about 2.5 KB (learner.prom: 7,372 bytes
	// for 3 peers); a member of 7 has 3 peers more than the captures.
	const perPeer = 2500
	seven := largest + 3*perPeer
	if MaxPageBytes < 5*seven {
		t.Errorf("MaxPageBytes %d under five times a 7-member page (%d bytes)", MaxPageBytes, seven)
	}
	t.Logf("largest captured page %d bytes, a 7-member page about %d; the cap leaves room for %d removed members' series", largest, seven, (MaxPageBytes-seven)/perPeer)
}
