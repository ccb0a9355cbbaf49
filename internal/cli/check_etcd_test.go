package cli

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// mainEtcd runs fleet-role check etcd through Main.
func mainEtcd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "etcd"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckEtcdUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	code, _, errOut := mainEtcd("--metrics-url", url, "--interval", "10ms", "--timeout", "1s")
	if code != ExitFail || !strings.Contains(errOut, url) {
		t.Errorf("exit %d, stderr %q; want 1 naming %s", code, errOut, url)
	}
}

func TestCheckEtcdUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--interval", "0s"},
		{"--interval", "-1s"},
		{"--timeout", "0s"},
		{"--metrics-url", "127.0.0.1:2381/metrics"},
		{"--metrics-url", "ftp://127.0.0.1/metrics"},
		{"--interval", "soon"},
		{"extra"},
	} {
		if code, _, errOut := mainEtcd(args...); code != ExitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errOut)
		}
	}
}

// check etcd reads within the scrape's bounds: a redirect, a page over the
// cap and a member that trickles its page each end in exit 1 naming why,
// within --timeout.
func TestCheckEtcdHostile(t *testing.T) {
	huge := bytes.Repeat([]byte("# padding\n"), 2<<20) // 20 MiB
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/metrics", http.StatusFound) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) { w.Write(huge) })
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write([]byte("#")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond) // the trickle is the case under test
		}
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/redirect": "redirect refused",
		"/huge":     "larger than 1048576 bytes",
		"/trickle":  "deadline exceeded",
	} {
		began := time.Now()
		code, _, errOut := mainEtcd("--metrics-url", srv.URL+path, "--interval", "10ms", "--timeout", "1s")
		if code != ExitFail || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 saying %q", path, code, errOut, want)
		}
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("%s: took %v with --timeout 1s", path, took)
		}
	}
}

// The latencies are held to the decision's limits at, just under and just
// over each: WAL fsync and backend commit under etcd's 10 and 25 ms, a
// peer round trip at most a tenth of the election timeout.
func TestEtcdVerdictAtTheLimits(t *testing.T) {
	p99 := func(ms float64) *float64 { v := ms / 1e3; return &v }
	gain := func(ms float64) etcdmetrics.Gain { return etcdmetrics.Gain{Count: 40, P99Seconds: p99(ms)} }
	fitReading := func() etcdmetrics.Reading {
		return etcdmetrics.Reading{HasLeader: true, IntervalSeconds: 5, WALFsync: gain(1), BackendCommit: gain(2),
			PeerRTT: map[string]etcdmetrics.Gain{"a1": gain(3)}}
	}
	s := settings.Defaults() // election timeout 5s: the round-trip limit 500ms
	for _, tc := range []struct {
		name string
		mut  func(*etcdmetrics.Reading)
		want string // the verdict
		why  string // in the verdict's line
	}{
		{"all fit", func(*etcdmetrics.Reading) {}, checkFit, "(3 of 3 judged)"},
		{"wal fsync just under", func(r *etcdmetrics.Reading) { r.WALFsync = gain(9.999) }, checkFit, ""},
		{"wal fsync at", func(r *etcdmetrics.Reading) { r.WALFsync = gain(10) }, checkUnfit, "wal_fsync p99"},
		{"wal fsync just over", func(r *etcdmetrics.Reading) { r.WALFsync = gain(10.001) }, checkUnfit, "wal_fsync p99"},
		{"backend commit just under", func(r *etcdmetrics.Reading) { r.BackendCommit = gain(24.999) }, checkFit, ""},
		{"backend commit at", func(r *etcdmetrics.Reading) { r.BackendCommit = gain(25) }, checkUnfit, "backend_commit p99"},
		{"peer rtt at", func(r *etcdmetrics.Reading) { r.PeerRTT["a1"] = gain(500) }, checkFit, ""},
		{"peer rtt just over", func(r *etcdmetrics.Reading) { r.PeerRTT["a1"] = gain(500.001) }, checkUnfit, "peer_rtt to a1 p99"},
		{"two over", func(r *etcdmetrics.Reading) { r.WALFsync, r.PeerRTT["a1"] = gain(11), gain(600) }, checkUnfit, "and 1 more"},
		{"no round trip observed", func(r *etcdmetrics.Reading) { r.PeerRTT["a1"] = etcdmetrics.Gain{} }, checkFit, "(2 of 3 judged)"},
		{"nothing observed", func(r *etcdmetrics.Reading) {
			r.WALFsync, r.BackendCommit, r.PeerRTT["a1"] = etcdmetrics.Gain{}, etcdmetrics.Gain{}, etcdmetrics.Gain{}
		}, checkNotJudged, "lengthen --interval"},
		{"no leader", func(r *etcdmetrics.Reading) {
			r.HasLeader = false
			r.WALFsync, r.BackendCommit, r.PeerRTT["a1"] = etcdmetrics.Gain{}, etcdmetrics.Gain{}, etcdmetrics.Gain{}
		}, checkNotJudged, "sees no leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fitReading()
			tc.mut(&r)
			rep := judgeEtcd(s, r)
			if rep.Judged.Verdict != tc.want || !strings.Contains(rep.Judged.Why, tc.why) {
				t.Errorf("verdict %s: %s; want %s saying %q\n%+v", rep.Judged.Verdict, rep.Judged.Why, tc.want, tc.why, rep.Signals)
			}
			if (rep.Judged.exit() != nil) != (tc.want == checkUnfit) {
				t.Errorf("exit %v for verdict %s", rep.Judged.exit(), rep.Judged.Verdict)
			}
		})
	}
	// The round-trip limit follows the election timeout flag: one round
	// trip of 0.3 s gained, read from its bucket (0.2048, 0.4096] at the
	// p99 as 407.6 ms, is fit at the default 5s (500 ms) and unfit at 3s
	// (300 ms).
	page := slowerRTT(t, 0.3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(page())) }))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		args []string
		code int
	}{{nil, ExitOK}, {[]string{"--election-timeout", "3s"}, ExitUnfit}} {
		code, out, errOut := mainEtcd(append(tc.args, "--metrics-url", srv.URL, "--interval", "10ms")...)
		if code != tc.code || (code == ExitUnfit && !strings.Contains(out, "must be at most 300ms")) {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
		}
	}
}

// A member whose WAL fsyncs turned slow between the two scrapes is unfit,
// and the command exits 3 naming the signal, its figure and its limit. The
// pages are a real member's (testdata/delta-1.prom), the second with 1,000
// fsyncs added between 16 and 32 ms.
func TestCheckEtcdUnfitExits3(t *testing.T) {
	first, err := os.ReadFile("../etcdmetrics/testdata/delta-1.prom")
	if err != nil {
		t.Fatal(err)
	}
	slow := slowerWALFsync(t, string(first), 1000)
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if served.Add(1) == 1 {
			w.Write(first)
			return
		}
		w.Write([]byte(slow))
	}))
	t.Cleanup(srv.Close)
	code, out, errOut := mainEtcd("--metrics-url", srv.URL+"/metrics", "--interval", "10ms", "--timeout", "2s")
	if code != ExitUnfit {
		t.Fatalf("exit %d, want 3\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"wal_fsync", "unfit: wal_fsync p99", "must be under 10ms", "(1000 observations)", "etcd FAQ: WAL fsync p99 under 10ms", "verdict: unfit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// slowerWALFsync adds n WAL fsyncs in the bucket up to 32 ms to a metrics
// page: every cumulative bucket from 0.032 up, the count, and the sum.
func slowerWALFsync(t *testing.T, page string, n int) string {
	t.Helper()
	const name = "etcd_disk_wal_fsync_duration_seconds"
	lines := strings.Split(page, "\n")
	changed := 0
	for i, l := range lines {
		metric, value, ok := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(metric, name) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(metric, name+"_bucket{"):
			le := metric[strings.Index(metric, `le="`)+4 : strings.LastIndex(metric, `"`)]
			if b, err := strconv.ParseFloat(le, 64); err == nil && b < 0.032 {
				continue
			}
			v += float64(n)
		case metric == name+"_count":
			v += float64(n)
		case metric == name+"_sum":
			v += float64(n) * 0.024
		default:
			continue
		}
		lines[i] = metric + " " + strconv.FormatFloat(v, 'g', -1, 64)
		changed++
	}
	if changed < 4 {
		t.Fatalf("the page has %d lines of %s to change", changed, name)
	}
	return strings.Join(lines, "\n")
}

// slowerRTT serves testdata/delta-1.prom with one more peer round trip of
// seconds to its first peer at each scrape: the peer_rtt histogram's
// buckets at and above seconds, its count and its sum (etcd's round-trip
// buckets are powers of two from 0.1 ms).
func slowerRTT(t *testing.T, seconds float64) func() string {
	t.Helper()
	first, err := os.ReadFile("../etcdmetrics/testdata/delta-1.prom")
	if err != nil {
		t.Fatal(err)
	}
	const name = "etcd_network_peer_round_trip_time_seconds"
	var n atomic.Int32
	return func() string {
		add := float64(n.Add(1) - 1)
		lines := strings.Split(string(first), "\n")
		var peer string
		for i, l := range lines {
			metric, value, ok := strings.Cut(l, " ")
			if !ok || !strings.HasPrefix(metric, name) {
				continue
			}
			to := metric[strings.Index(metric, `To="`)+4:]
			to = to[:strings.Index(to, `"`)]
			if peer == "" {
				peer = to
			}
			v, err := strconv.ParseFloat(value, 64)
			if to != peer || err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(metric, name+"_bucket{"):
				le := metric[strings.Index(metric, `le="`)+4:]
				le = le[:strings.Index(le, `"`)]
				if b, err := strconv.ParseFloat(le, 64); err == nil && b < seconds {
					continue
				}
				v += add
			case strings.HasPrefix(metric, name+"_count"):
				v += add
			case strings.HasPrefix(metric, name+"_sum"):
				v += add * seconds
			default:
				continue
			}
			lines[i] = metric + " " + strconv.FormatFloat(v, 'g', -1, 64)
		}
		return strings.Join(lines, "\n")
	}
}
