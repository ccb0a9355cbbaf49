package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/tcptest"
	"golang.org/x/sys/unix"
)

func TestParsePeer(t *testing.T) {
	for _, tc := range []struct {
		peer string
		host string
		port uint16
		ok   bool
	}{
		{"127.0.0.1:2380", "127.0.0.1", 2380, true},
		{"[::1]:2380", "::1", 2380, true},
		{"etcd-0.example:2380", "etcd-0.example", 2380, true},
		// The port's bounds: 0 just under, 1 at the bottom, 65535 at the
		// top, 65536 just over.
		{"h:0", "", 0, false},
		{"h:1", "h", 1, true},
		{"h:65535", "h", 65535, true},
		{"h:65536", "", 0, false},
		{"h:-1", "", 0, false},
		{"h:etcd", "", 0, false},
		{"h:", "", 0, false},
		{":2380", "", 0, false},
		{"127.0.0.1", "", 0, false},
		{"::1:2380", "", 0, false},
		{"", "", 0, false},
	} {
		host, port, err := ParsePeer(tc.peer)
		if tc.ok {
			if err != nil || host != tc.host || port != tc.port {
				t.Errorf("ParsePeer(%q) = %q, %d, %v; want %q, %d, nil", tc.peer, host, port, err, tc.host, tc.port)
			}
			continue
		}
		if !errors.Is(err, ErrBadPeer) {
			t.Errorf("ParsePeer(%q) = %v, want ErrBadPeer", tc.peer, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.peer)) {
			t.Errorf("ParsePeer(%q) error %q does not name the peer", tc.peer, err)
		}
	}
}

func TestResultJSON(t *testing.T) {
	ok := Result{Peer: "a:1", OK: true, Seconds: 0.00025}
	failed := Result{Peer: "b:2", Err: "dial tcp b:2: connect: connection refused"}
	b, err := json.Marshal([]Result{ok, failed})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"peer":"a:1","ok":true,"connect_seconds":0.00025},{"peer":"b:2","ok":false,"error":"dial tcp b:2: connect: connection refused"}]`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
	var back []Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != ok || back[1] != failed {
		t.Errorf("round trip = %+v, want %+v and %+v", back, ok, failed)
	}
}

func TestMeasureLoopback(t *testing.T) {
	accepted := make(chan string, 8)
	var peers []string
	for _, host := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "::1"} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go tcptest.AcceptAll(l, accepted)
		peers = append(peers, l.Addr().String())
	}
	refused := tcptest.ClosedPort(t, net.Listen, "127.0.0.1")
	peers = append(peers[:2], append([]string{refused}, peers[2:]...)...)

	got := Measure(context.Background(), peers, 5*time.Second)
	if len(got) != len(peers) {
		t.Fatalf("%d results for %d peers", len(got), len(peers))
	}
	for i, r := range got {
		if r.Peer != peers[i] {
			t.Errorf("result %d is for %s, want %s (the order given)", i, r.Peer, peers[i])
		}
		if r.Peer == refused {
			if r.OK || r.Seconds != 0 || !strings.Contains(r.Err, "connection refused") {
				t.Errorf("closed port %s: %+v, want a failure with connection refused and no time", r.Peer, r)
			}
			continue
		}
		if !r.OK || r.Seconds <= 0 || r.Err != "" {
			t.Errorf("listener %s: %+v, want ok with a positive time", r.Peer, r)
		}
	}
	// Each listener really saw its connection.
	seen := map[string]int{}
	deadline := time.After(10 * time.Second)
	for n := 0; n < len(peers)-1; n++ {
		select {
		case a := <-accepted:
			seen[a]++
		case <-deadline:
			t.Fatalf("listeners accepted %v, want one connection each of %v", seen, peers)
		}
	}
	for _, p := range peers {
		if p != refused && seen[p] != 1 {
			t.Errorf("listener %s accepted %d connections, want 1", p, seen[p])
		}
	}
}

func TestMeasureMalformedPeerIsNotDialled(t *testing.T) {
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("should not dial")
	}
	got := MeasureWith(context.Background(), dial, []string{"no-port"}, time.Second)
	if len(got) != 1 || got[0].OK || !strings.Contains(got[0].Err, "host:port") {
		t.Errorf("got %+v, want one failure saying host:port", got)
	}
	if dials.Load() != 0 {
		t.Errorf("dialled %d times, want 0", dials.Load())
	}
}

func TestMeasureCancelledContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := Measure(ctx, []string{l.Addr().String()}, 5*time.Second)
	if len(got) != 1 || got[0].OK || !strings.Contains(got[0].Err, "canceled") {
		t.Errorf("got %+v, want a failure saying canceled", got)
	}
}

// TestMeasureSocketDeadlineBeforeContext: net's socket deadline can fire a
// moment before the context's own timer, so a timeout must be told from the
// error as well as from the context.
func TestMeasureSocketDeadlineBeforeContext(t *testing.T) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
	}
	got := MeasureWith(context.Background(), dial, []string{"10.77.0.2:2380"}, time.Hour)
	if len(got) != 1 || got[0].OK || !strings.Contains(got[0].Err, "no connection within 1h0m0s") {
		t.Errorf("got %+v, want a failure naming the 1h timeout", got)
	}
	refused := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: unix.ECONNREFUSED}
	}
	got = MeasureWith(context.Background(), refused, []string{"10.77.0.2:2380"}, time.Hour)
	if len(got) != 1 || got[0].OK || strings.Contains(got[0].Err, "no connection within") {
		t.Errorf("got %+v, want a refusal not called a timeout", got)
	}
}
