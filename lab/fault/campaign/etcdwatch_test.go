//go:build linux

package campaign

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readState reads a real member's page (the leader of three, captured for
// the product's parser) as the watch does from inside a voter's host: led,
// both peers connected, its one leader change. A page that is no etcd page
// or does not parse tells nothing.
func TestReadState(t *testing.T) {
	leader, err := os.ReadFile(filepath.Join("..", "..", "..", "internal", "etcdmetrics", "testdata", "leader.prom"))
	if err != nil {
		t.Fatal(err)
	}
	// A follower cut off from one peer: its stream to it down (0), and no
	// leader.
	cut := string(leader)
	for _, line := range []string{`etcd_network_active_peers{Local="c257a8e496d01bb7",Remote="9bfeb49a8a2e8d0d"} `, "etcd_server_has_leader "} {
		if !strings.Contains(cut, "\n"+line+"1\n") {
			t.Fatalf("the capture no longer holds %q1", line)
		}
		cut = strings.Replace(cut, "\n"+line+"1\n", "\n"+line+"0\n", 1)
	}
	for _, c := range []struct {
		what, page string
		want       memberState
		ok         bool
	}{
		{"the leader's page", string(leader), memberState{led: true, connected: 2, leaderChanges: 1}, true},
		{"a member cut off", cut, memberState{led: false, connected: 1, leaderChanges: 1}, true},
		{"no etcd page", "# TYPE go_goroutines gauge\ngo_goroutines 12\n", memberState{}, false},
		{"a malformed page", "etcd_server_has_leader 1\netcd_network_active_peers{Remote=\"x\" 1\n", memberState{}, false},
	} {
		got, ok := readState(context.Background(), serve(t, c.page))
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %+v, %t; want %+v, %t", c.what, got, ok, c.want, c.ok)
		}
	}
}

// serve answers every request of the client it returns with page, whatever
// address it asks for, as a host's loopback would.
func serve(t *testing.T, page string) *http.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	}}
}
