package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/lab/testenv"
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

// acceptAll accepts connections on l until it is closed and reports each.
func acceptAll(l net.Listener, accepted chan<- string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		accepted <- l.Addr().String()
		c.Close()
	}
}

// closedPort returns an address on host where nothing listens: a port the
// kernel just handed out and that was closed again.
func closedPort(t *testing.T, listen func(network, addr string) (net.Listener, error), host string) string {
	t.Helper()
	l, err := listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
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
		go acceptAll(l, accepted)
		peers = append(peers, l.Addr().String())
	}
	refused := closedPort(t, net.Listen, "127.0.0.1")
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

// netns is a network namespace made for one test: loopback up, and a veth
// pair whose far end answers nothing, with a permanent neighbour entry for
// Blackhole so that a SYN to it leaves and is never answered (no ARP failure
// cuts the wait short). This kernel has no dummy device and no iptables, so
// that is the silent peer.
type netns struct {
	name string
}

// Blackhole is the address inside the namespace that never answers.
const blackhole = "10.77.0.2"

var netnsSeq atomic.Int32

func newNetns(t *testing.T) *netns {
	t.Helper()
	testenv.RequireRoot(t)
	ns := &netns{name: fmt.Sprintf("frconnect-%d-%d", os.Getpid(), netnsSeq.Add(1))}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns.name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns.name, err, out)
		}
	})
	in := []string{"netns", "exec", ns.name, "ip"}
	run(append(in, "link", "set", "lo", "up")...)
	run(append(in, "link", "add", "v0", "type", "veth", "peer", "name", "v1")...)
	run(append(in, "addr", "add", "10.77.0.1/24", "dev", "v0")...)
	run(append(in, "link", "set", "v0", "up")...)
	run(append(in, "link", "set", "v1", "up")...)
	run(append(in, "neigh", "add", blackhole, "lladdr", "02:00:00:00:00:02", "dev", "v0", "nud", "permanent")...)
	return ns
}

// do runs f on an OS thread that has entered the namespace. The thread is
// never unlocked, so the runtime ends it with the goroutine and no other
// goroutine ever runs in the namespace by accident. Sockets made inside f
// stay in the namespace wherever they are used afterwards.
func (ns *netns) do(f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", ns.name, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		f()
		errc <- nil
	}()
	return <-errc
}

func (ns *netns) listen(network, addr string) (l net.Listener, err error) {
	if nerr := ns.do(func() { l, err = net.Listen(network, addr) }); nerr != nil {
		return nil, nerr
	}
	return l, err
}

func (ns *netns) dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	var d net.Dialer
	if nerr := ns.do(func() { c, err = d.DialContext(ctx, network, addr) }); nerr != nil {
		return nil, nerr
	}
	return c, err
}

// TestMeasureTimeoutInNetns: a peer that never answers fails with a timeout
// while the others are measured, and the peers are dialled at once: each dial
// waits until every dial has started, so a Measure that dialled one peer after
// another would time the first out and fail every listener.
func TestMeasureTimeoutInNetns(t *testing.T) {
	ns := newNetns(t)
	accepted := make(chan string, 8)
	var peers []string
	for range 2 {
		l, err := ns.listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go acceptAll(l, accepted)
		peers = append(peers, l.Addr().String())
	}
	silent := net.JoinHostPort(blackhole, "2380")
	refused := closedPort(t, ns.listen, "127.0.0.1")
	peers = []string{peers[0], silent, peers[1], refused}

	var started sync.WaitGroup
	started.Add(len(peers))
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		started.Done()
		select {
		case <-allStarted:
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: waited for the other dials to start: %w", addr, ctx.Err())
		}
		return ns.dial(ctx, network, addr)
	}

	const timeout = 2 * time.Second
	got := MeasureWith(context.Background(), dial, peers, timeout)
	if len(got) != len(peers) {
		t.Fatalf("%d results for %d peers", len(got), len(peers))
	}
	for i, r := range got {
		if r.Peer != peers[i] {
			t.Errorf("result %d is for %s, want %s", i, r.Peer, peers[i])
		}
		switch r.Peer {
		case silent:
			if r.OK || r.Seconds != 0 || !strings.Contains(r.Err, "no connection within 2s") || !strings.Contains(r.Err, "i/o timeout") {
				t.Errorf("silent peer: %+v, want a timeout failure naming 2s", r)
			}
		case refused:
			if r.OK || !strings.Contains(r.Err, "connection refused") {
				t.Errorf("closed port: %+v, want connection refused", r)
			}
		default:
			if !r.OK || r.Seconds <= 0 {
				t.Errorf("listener %s: %+v, want ok with a positive time", r.Peer, r)
			}
		}
		t.Logf("%s: ok=%v connect_seconds=%g error=%q", r.Peer, r.OK, r.Seconds, r.Err)
	}
	for range 2 {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatal("a listener in the namespace saw no connection")
		}
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
