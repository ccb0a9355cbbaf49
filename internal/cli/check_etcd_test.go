package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/etcdproc"
	"github.com/fleet-role/fleet-role/lab/testenv"
)

// mainEtcd runs fleet-role check etcd through Main.
func mainEtcd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "etcd"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckEtcdLive(t *testing.T) {
	c, err := etcdproc.Start(context.Background(), etcdproc.Config{Binary: testenv.Etcd(t), Dir: t.TempDir(), Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	l, err := c.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Writes during the interval, so that the member gains WAL fsyncs.
	done := make(chan error, 1)
	go func() { done <- c.Put(context.Background(), 30) }()
	code, out, errOut := mainEtcd("--metrics-url", l.MetricsURL, "--interval", "1s", "--timeout", "2s", "--json")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("%s", out)
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"member_id", "is_leader", "is_learner", "has_leader", "connected_peers", "known_peers", "leader_changes", "wal_fsync", "backend_commit", "peer_rtt", "db_size_bytes", "quota_bytes", "interval_seconds"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if r["member_id"] != l.ID || r["is_leader"] != true || r["connected_peers"] != float64(2) {
		t.Errorf("member %v leader %v connected %v, want %s true 2", r["member_id"], r["is_leader"], r["connected_peers"], l.ID)
	}
	wal, _ := r["wal_fsync"].(map[string]any)
	if n, _ := wal["count"].(float64); n < 1 {
		t.Errorf("wal_fsync %v, want a count above 0", wal)
	}
	if _, ok := wal["p99_seconds"]; !ok {
		t.Errorf("wal_fsync lacks p99_seconds: %v", wal)
	}
	if s, _ := r["interval_seconds"].(float64); s < 1 {
		t.Errorf("interval_seconds %v, want at least 1", r["interval_seconds"])
	}

	code, out, errOut = mainEtcd("--metrics-url", l.MetricsURL, "--interval", "100ms")
	if code != ExitOK {
		t.Fatalf("human: exit %d: %s", code, errOut)
	}
	t.Logf("%s", out)
	for _, want := range []string{"etcd member " + l.ID + " (leader), sees a leader", "2 connected of 2 known", "wal fsync:", "backend commit:", "of 2.0 GiB quota"} {
		if !strings.Contains(out, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}
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
