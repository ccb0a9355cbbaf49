package metricscrape

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leaderPage is a real etcd v3.6.15 page, the leader of three members,
// captured for the product's own parser (internal/etcdmetrics): read where
// it is, so that the harness's reader is held to the very page the product
// is.
var leaderPage = filepath.Join("..", "..", "..", "internal", "etcdmetrics", "testdata", "leader.prom")

const (
	leaderID    = "c257a8e496d01bb7"
	followerIDs = "9bfeb49a8a2e8d0d aedb94a1956af3cc"
)

func readLeader(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(leaderPage)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseEtcdPage(t *testing.T) {
	b := readLeader(t)
	p, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Bytes != len(b) {
		t.Errorf("Bytes %d, want the page's %d", p.Bytes, len(b))
	}
	for _, c := range []struct {
		name  string
		match Labels
		want  float64
	}{
		{"etcd_server_has_leader", nil, 1},                                                        // gauge
		{"etcd_server_is_leader", nil, 1},                                                         // gauge
		{"etcd_server_leader_changes_seen_total", nil, 1},                                         // counter
		{"etcd_server_id", Labels{"server_id": leaderID}, 1},                                      // labelled
		{"etcd_server_version", Labels{"server_version": "3.6.15"}, 1},                            // labelled
		{"etcd_network_active_peers", Labels{"Remote": "aedb94a1956af3cc"}, 1},                    // one of two
		{"etcd_network_active_peers", Labels{"Local": leaderID, "Remote": "9bfeb49a8a2e8d0d"}, 1}, // both labels
	} {
		if v, ok := p.Value(c.name, c.match); !ok || v != c.want {
			t.Errorf("Value(%s, %v) = %v, %t; want %v", c.name, c.match, v, ok, c.want)
		}
	}
	// A histogram's series are its family's, not families of their own.
	if v, ok := p.Value("etcd_disk_wal_fsync_duration_seconds_count", nil); ok {
		t.Errorf("Value(etcd_disk_wal_fsync_duration_seconds_count) = %v, found; want none", v)
	}
	if v, ok := p.Value("etcd_server_id", Labels{"server_id": "0"}); ok {
		t.Errorf("Value(etcd_server_id, server_id=0) = %v, found; want none (no such series)", v)
	}
	if v, ok := p.Value("no_such_family", nil); ok || p.Has("no_such_family") {
		t.Errorf("a family the page lacks: Value %v, %t; Has %t", v, ok, p.Has("no_such_family"))
	}

	peers := p.Series("etcd_network_active_peers", Labels{"Local": leaderID})
	var remotes []string
	for _, s := range peers {
		remotes = append(remotes, s.Labels["Remote"])
	}
	if got := strings.Join(remotes, " "); got != followerIDs {
		t.Errorf("active peers' Remote %q, want %q", got, followerIDs)
	}
	if n := len(p.Series("etcd_network_active_peers", nil)); n != len(peers) {
		t.Errorf("%d active peer series with no match, want every one (%d)", n, len(peers))
	}

	// A histogram is on the page but has no one value.
	if !p.Has("etcd_disk_wal_fsync_duration_seconds") || p.Series("etcd_disk_wal_fsync_duration_seconds", nil) != nil {
		t.Errorf("histogram: Has %t, Series %v; want present with no series of one value",
			p.Has("etcd_disk_wal_fsync_duration_seconds"), p.Series("etcd_disk_wal_fsync_duration_seconds", nil))
	}
	names := p.Names()
	if len(names) == 0 || names[0] > names[len(names)-1] || !p.Has(names[0]) {
		t.Errorf("Names not the page's families sorted: %d names, first %q", len(names), names[0])
	}
}

// TextBytes is what the exporter wrote of the family: etcd writes with the
// same encoder, so the figure is the bytes of its lines on the page.
func TestTextBytesMatchesThePage(t *testing.T) {
	b := readLeader(t)
	p, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd_server_has_leader", "etcd_network_active_peers", "etcd_disk_wal_fsync_duration_seconds"} {
		want := 0
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if of(line) == name {
				want += len(line)
			}
		}
		got, err := p.TextBytes(name)
		if err != nil || got != want || want == 0 {
			t.Errorf("TextBytes(%s) = %d, %v; the page holds %d bytes of it", name, got, err, want)
		}
	}
	if n, err := p.TextBytes("no_such_family"); n != 0 || err != nil {
		t.Errorf("TextBytes of a family the page lacks: %d, %v; want 0, nil", n, err)
	}
}

// of is the family a line of the page belongs to, for checking TextBytes
// against the page's own lines (a histogram's series carry a suffix).
func of(line string) string {
	line = strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
	name, _, _ := strings.Cut(line, " ")
	name, _, _ = strings.Cut(name, "{")
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && strings.HasPrefix(base, "etcd_disk_wal_fsync_duration_seconds") {
			return base
		}
	}
	return name
}

func TestParseMalformed(t *testing.T) {
	for _, c := range []struct {
		what, page, want string
	}{
		{"an unclosed label set", "etcd_server_has_leader 1\netcd_network_active_peers{Remote=\"a\" 1\n", "line 2"},
		{"a value that is no number", "etcd_server_has_leader one\n", "line 1"},
		{"a second TYPE for a family", "# TYPE x gauge\nx 1\n# TYPE x counter\n", "line 3"},
	} {
		p, err := Parse(strings.NewReader(c.page))
		if err == nil {
			t.Errorf("%s: parsed, %d families; want an error", c.what, len(p.Names()))
			continue
		}
		if !strings.Contains(err.Error(), "parse metrics page") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say it is the page's parse, at %s", c.what, err, c.want)
		}
	}
	// The parser quotes the token it stopped at: a line of junk is cut.
	junk := "etcd_server_has_leader " + strings.Repeat("9x", 4*maxErrorText) + "\n"
	_, err := Parse(strings.NewReader(junk))
	if err == nil || len(err.Error()) > 2*maxErrorText {
		t.Errorf("a line of junk: error of %d bytes (%v), want one cut near %d", len(err.Error()), err, maxErrorText)
	}
}

func TestFetch(t *testing.T) {
	b := readLeader(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		if r.Header.Get("Accept") != textAccept {
			http.Error(w, "asked for "+r.Header.Get("Accept"), http.StatusNotAcceptable)
			return
		}
		w.Write(b)
	}))
	defer srv.Close()
	ctx := context.Background()
	p, err := Fetch(ctx, nil, srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Value("etcd_server_is_leader", nil); !ok || v != 1 || p.Bytes != len(b) {
		t.Errorf("fetched page: is_leader %v, %t; %d bytes of %d", v, ok, p.Bytes, len(b))
	}
	if _, err := Fetch(ctx, srv.Client(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404: %v, want an error naming the status", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Fetch(cancelled, nil, srv.URL+"/metrics"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled fetch: %v, want context.Canceled", err)
	}
}
