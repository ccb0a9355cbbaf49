package connect

import (
	"context"
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

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/lab/kit/tcptest"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

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
		go tcptest.AcceptAll(l, accepted)
		peers = append(peers, l.Addr().String())
	}
	silent := net.JoinHostPort(blackhole, "2380")
	refused := tcptest.ClosedPort(t, ns.listen, "127.0.0.1")
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
	got := connect.MeasureWith(context.Background(), dial, peers, timeout)
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
