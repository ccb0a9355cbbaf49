//go:build linux

package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoPort is where every test host runs its echo listener.
const echoPort = 7000

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("netlab makes network namespaces and TUN devices and needs root (CI runs as root)")
	}
}

func newLab(t testing.TB, cfg Config) *Lab {
	t.Helper()
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// echo serves an echo listener in h on echoPort until the test ends.
func echo(t testing.TB, h *Host) {
	t.Helper()
	ln, err := h.Listen(context.Background(), "tcp", h.AddrPort(echoPort))
	if err != nil {
		t.Fatalf("listen in %s: %v", h.Name, err)
	}
	serve(t, ln)
}

func serve(t testing.TB, ln net.Listener) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// connectTime is how long a TCP connect from h to addr takes, timed inside
// the namespace so that the thread switch is not counted.
func connectTime(ctx context.Context, h *Host, addr string) (time.Duration, error) {
	var took time.Duration
	err := h.Do(func() error {
		var d net.Dialer
		start := time.Now()
		c, err := d.DialContext(ctx, "tcp", addr)
		took = time.Since(start)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return took, err
}

// connectTimes takes n connect times.
func connectTimes(t testing.TB, h *Host, addr string, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := connectTime(ctx, h, addr)
		cancel()
		if err != nil {
			t.Fatalf("connect %s -> %s: %v", h.Name, addr, err)
		}
		out = append(out, d)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// roundTrip sends one byte over c and waits for the echo.
func roundTrip(c net.Conn, timeout time.Duration) (time.Duration, error) {
	c.SetDeadline(time.Now().Add(timeout))
	start := time.Now()
	if _, err := c.Write([]byte{'p'}); err != nil {
		return 0, err
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// eventually polls cond every 50 ms until it returns nil or the deadline
// passes, and fails with its last error.
func eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ipOut(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestEveryHostReachesEveryOther(t *testing.T) {
	names := []string{"server-1", "server-2", "server-3", "standby"}
	l := newLab(t, Config{Hosts: names, ConnectRoot: true})
	if len(l.Hosts) != len(names) {
		t.Fatalf("%d hosts, want %d", len(l.Hosts), len(names))
	}
	for i, h := range l.Hosts {
		if h.Name != names[i] || !l.Subnet.Contains(h.Addr) || h.Addr != nthAddr(l.Subnet, 2+i) {
			t.Fatalf("host %d = %s %s, want %s at %s in %s", i, h.Name, h.Addr, names[i], nthAddr(l.Subnet, 2+i), l.Subnet)
		}
		if l.Host(h.Name) != h {
			t.Fatalf("Host(%q) does not return host %d", h.Name, i)
		}
		echo(t, h)
	}
	if l.Host("nobody") != nil {
		t.Fatalf("Host(nobody) is not nil")
	}
	if !l.Subnet.Contains(l.RootAddr) || !l.Subnet.Contains(l.RouterAddr) {
		t.Fatalf("root %s or router %s outside %s", l.RootAddr, l.RouterAddr, l.Subnet)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, from := range l.Hosts {
		for _, to := range l.Hosts {
			if from == to {
				continue
			}
			c, err := from.Dial(ctx, "tcp", to.AddrPort(echoPort))
			if err != nil {
				t.Fatalf("%s -> %s: %v", from.Name, to.Name, err)
			}
			if _, err := roundTrip(c, 10*time.Second); err != nil {
				t.Fatalf("%s -> %s: echo: %v", from.Name, to.Name, err)
			}
			// The listener sees the dialing host's own address.
			if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != from.Addr {
				t.Errorf("%s -> %s: source %s, want %s", from.Name, to.Name, got, from.Addr)
			}
			c.Close()
		}
	}

	// ConnectRoot: this process reaches every host, and every host reaches a
	// listener on the root's lab address.
	rootLn, err := net.Listen("tcp", netip.AddrPortFrom(l.RootAddr, 0).String())
	if err != nil {
		t.Fatalf("listen on root address: %v", err)
	}
	serve(t, rootLn)
	for _, h := range l.Hosts {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.AddrPort(echoPort))
		if err != nil {
			t.Fatalf("root -> %s: %v", h.Name, err)
		}
		if _, err := roundTrip(c, 10*time.Second); err != nil {
			t.Fatalf("root -> %s: echo: %v", h.Name, err)
		}
		c.Close()
		c, err = h.Dial(ctx, "tcp", rootLn.Addr().String())
		if err != nil {
			t.Fatalf("%s -> root: %v", h.Name, err)
		}
		if _, err := roundTrip(c, 10*time.Second); err != nil {
			t.Fatalf("%s -> root: echo: %v", h.Name, err)
		}
		c.Close()
	}

	// Each host has its own loopback: a metrics listener on 127.0.0.1:2381
	// in one host is not reachable as 127.0.0.1:2381 from another.
	a, b := l.Hosts[0], l.Hosts[1]
	lo, err := a.Listen(ctx, "tcp", "127.0.0.1:2381")
	if err != nil {
		t.Fatalf("listen on %s's loopback: %v", a.Name, err)
	}
	serve(t, lo)
	c, err := a.Dial(ctx, "tcp", "127.0.0.1:2381")
	if err != nil {
		t.Fatalf("%s -> own loopback: %v", a.Name, err)
	}
	c.Close()
	if c, err := b.Dial(ctx, "tcp", "127.0.0.1:2381"); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("%s -> 127.0.0.1:2381 = %v, want connection refused (loopbacks are per host)", b.Name, err)
	}

	// Commands run inside the host: it sees its own address on eth0, and it
	// has no route out of the lab (a route lookup sends no packet).
	out, err := a.Command(ctx, "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), a.Addr.String()+"/32") {
		t.Fatalf("ip addr inside %s: %v: %s (want %s/32)", a.Name, err, out, a.Addr)
	}
	for _, ns := range []string{a.Namespace, l.Router} {
		out, err := exec.Command("ip", "-n", ns, "route", "get", "203.0.113.1").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unreachable") {
			t.Fatalf("route out of the lab from %s: %v: %s (want unreachable)", ns, err, out)
		}
	}
	out, err = exec.Command("ip", "netns", "exec", l.Router, "cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/conf/all/rp_filter").CombinedOutput()
	if err != nil || strings.Fields(string(out))[0] != "1" || strings.Fields(string(out))[1] != "0" {
		t.Fatalf("router ip_forward, rp_filter = %q (%v), want 1, 0", out, err)
	}
}

func TestDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	l := newLab(t, Config{Hosts: []string{"a", "b", "c"}})
	a, b, c := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	for _, h := range l.Hosts {
		echo(t, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A stream opened before the delay, as etcd's peer streams are.
	stream, err := a.Dial(ctx, "tcp", b.AddrPort(echoPort))
	if err != nil {
		t.Fatalf("dial a -> b: %v", err)
	}
	defer stream.Close()
	eventually(t, 10*time.Second, "undelayed round trip a <-> b under d", func() error {
		rtt, err := roundTrip(stream, 10*time.Second)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if rtt >= d {
			return fmt.Errorf("round trip %v", rtt)
		}
		return nil
	})

	if err := l.SetDelay("b", d); err != nil {
		t.Fatalf("SetDelay(b, %v): %v", d, err)
	}
	if got := l.Delay("b"); got != d {
		t.Fatalf("Delay(b) = %v, want %v", got, d)
	}
	if n := countDelayRules(t, l); n != 2 {
		t.Fatalf("%d delay rules in the router, want 2 (iif and to)", n)
	}

	// SYN crosses b's path once (to b), SYN-ACK once (from b): at least 2d,
	// from either side.
	for _, pair := range [][2]*Host{{a, b}, {b, a}, {c, b}} {
		for _, took := range connectTimes(t, pair[0], pair[1].AddrPort(echoPort), 3) {
			if took < 2*d {
				t.Errorf("connect %s -> %s took %v, under 2d = %v", pair[0].Name, pair[1].Name, took, 2*d)
			}
			if took > 2*d+2*time.Second {
				t.Errorf("connect %s -> %s took %v, far over 2d = %v", pair[0].Name, pair[1].Name, took, 2*d)
			}
		}
	}
	// Neither a nor c is delayed: their packets never reach the TUN.
	if fast := slices.Min(connectTimes(t, a, c.AddrPort(echoPort), 5)); fast >= d {
		t.Errorf("fastest connect a -> c took %v, want far under 2d = %v", fast, 2*d)
	}

	// The established stream sees it too, every round trip.
	for i := range 3 {
		rtt, err := roundTrip(stream, 10*time.Second)
		if err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		if rtt < 2*d {
			t.Errorf("round trip %d a <-> b took %v, under 2d = %v", i, rtt, 2*d)
		}
	}

	// Two delayed hosts: a packet between them is held for both delays.
	const dc = 30 * time.Millisecond
	if err := l.SetDelay("c", dc); err != nil {
		t.Fatalf("SetDelay(c): %v", err)
	}
	if n := countDelayRules(t, l); n != 4 {
		t.Fatalf("%d delay rules in the router, want 4", n)
	}
	for _, took := range connectTimes(t, b, c.AddrPort(echoPort), 3) {
		if took < 2*(d+dc) {
			t.Errorf("connect b -> c took %v, under 2(d+dc) = %v", took, 2*(d+dc))
		}
	}
	for _, took := range connectTimes(t, a, c.AddrPort(echoPort), 3) {
		if took < 2*dc || took >= 2*d {
			t.Errorf("connect a -> c took %v, want at least 2dc = %v and under 2d = %v", took, 2*dc, 2*d)
		}
	}

	// Changing a delay in place: b's new, shorter delay applies.
	if err := l.SetDelay("b", d/2); err != nil {
		t.Fatalf("SetDelay(b, d/2): %v", err)
	}
	if n := countDelayRules(t, l); n != 4 {
		t.Fatalf("%d delay rules after changing b's delay, want 4", n)
	}
	// The fastest of three: a connect made right after the change may wait
	// behind the closing packets of an earlier connection of the same pair,
	// still held for the old delay, since a pair's packets keep their order.
	took := connectTimes(t, a, b.AddrPort(echoPort), 3)
	if fast := slices.Min(took); fast < d || fast >= 2*d {
		t.Errorf("connects a -> b with d/2 took %v, want the fastest at least %v and under %v", took, d, 2*d)
	}

	// Removing it restores the direct path, for new connects and the stream.
	for _, h := range []string{"b", "c"} {
		if err := l.SetDelay(h, 0); err != nil {
			t.Fatalf("SetDelay(%s, 0): %v", h, err)
		}
	}
	if n := countDelayRules(t, l); n != 0 {
		t.Fatalf("%d delay rules left after SetDelay(0), want 0", n)
	}
	if fast := slices.Min(connectTimes(t, a, b.AddrPort(echoPort), 5)); fast >= d {
		t.Errorf("fastest connect a -> b after removing the delay took %v, want under %v", fast, d)
	}
	eventually(t, 10*time.Second, "round trip a <-> b back under d", func() error {
		rtt, err := roundTrip(stream, 10*time.Second)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if rtt >= d {
			return fmt.Errorf("round trip %v", rtt)
		}
		return nil
	})
	eventually(t, 10*time.Second, "delay queue drained", func() error {
		if s := l.Stats(); s.Queued != 0 {
			return fmt.Errorf("%d packets still queued", s.Queued)
		}
		return nil
	})
	s := l.Stats()
	if s.Forwarded == 0 || s.Dropped != 0 {
		t.Errorf("stats %+v: want packets forwarded and none dropped", s)
	}
	t.Logf("delay stats: %+v", s)

	if err := l.SetDelay("b", -time.Nanosecond); err == nil {
		t.Errorf("SetDelay(b, -1ns) accepted")
	}
	if err := l.SetDelay("nobody", d); err == nil {
		t.Errorf("SetDelay(nobody) accepted")
	}
	// The smallest delay still diverts the host through the TUN.
	if err := l.SetDelay("b", time.Nanosecond); err != nil {
		t.Fatalf("SetDelay(b, 1ns): %v", err)
	}
	before := l.Stats().Forwarded
	connectTimes(t, a, b.AddrPort(echoPort), 1)
	if after := l.Stats().Forwarded; after < before+2 {
		t.Errorf("with 1 ns on b a connect passed %d packets through the TUN, want at least SYN and SYN-ACK", after-before)
	}
}

func countDelayRules(t testing.TB, l *Lab) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(ipOut(t, "-n", l.Router, "rule", "show"), "\n") {
		if strings.Contains(line, "lookup "+strconv.Itoa(delayTable)) {
			n++
		}
	}
	return n
}

func TestLinkDown(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a", "b"}, ConnectRoot: true})
	a, b := l.Hosts[0], l.Hosts[1]
	echo(t, a)
	echo(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := a.Dial(ctx, "tcp", b.AddrPort(echoPort))
	if err != nil {
		t.Fatalf("dial a -> b: %v", err)
	}
	defer stream.Close()
	if _, err := roundTrip(stream, 10*time.Second); err != nil {
		t.Fatalf("round trip before the partition: %v", err)
	}

	if err := l.LinkDown("b"); err != nil {
		t.Fatalf("LinkDown(b): %v", err)
	}
	const probe = 500 * time.Millisecond
	for _, c := range []struct {
		name string
		dial func(context.Context) (net.Conn, error)
	}{
		{"a -> b", func(ctx context.Context) (net.Conn, error) { return a.Dial(ctx, "tcp", b.AddrPort(echoPort)) }},
		{"b -> a", func(ctx context.Context) (net.Conn, error) { return b.Dial(ctx, "tcp", a.AddrPort(echoPort)) }},
		{"root -> b", func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", b.AddrPort(echoPort))
		}},
	} {
		pctx, pcancel := context.WithTimeout(ctx, probe)
		conn, err := c.dial(pctx)
		pcancel()
		if err == nil {
			conn.Close()
			t.Fatalf("%s connected through the partition", c.name)
		}
		// Silent loss, as on a real cut: the connect times out.
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: %v, want a timeout", c.name, err)
		}
	}
	if _, err := roundTrip(stream, probe); err == nil {
		t.Fatalf("round trip over the stream crossed the partition")
	}
	// a still reaches the rest of the lab.
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	var d net.Dialer
	if c, err := d.DialContext(pctx, "tcp", a.AddrPort(echoPort)); err != nil {
		t.Errorf("root -> a during b's partition: %v", err)
	} else {
		c.Close()
	}
	pcancel()

	if err := l.LinkUp("b"); err != nil {
		t.Fatalf("LinkUp(b): %v", err)
	}
	eventually(t, 10*time.Second, "a -> b after LinkUp", func() error {
		_, err := connectTime(ctx, a, b.AddrPort(echoPort))
		return err
	})
	// The stream survived: its echo of the byte sent during the partition
	// arrives once TCP retransmits it (backoff: seconds).
	stream.SetDeadline(time.Now().Add(30 * time.Second))
	var buf [1]byte
	if _, err := io.ReadFull(stream, buf[:]); err != nil {
		t.Fatalf("stream after LinkUp: %v", err)
	}
	if _, err := roundTrip(stream, 30*time.Second); err != nil {
		t.Fatalf("round trip after LinkUp: %v", err)
	}
	if err := l.LinkDown("nobody"); err == nil {
		t.Errorf("LinkDown(nobody) accepted")
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	requireRoot(t)
	rulesBefore := ipOut(t, "rule", "show")
	ctx := context.Background()
	l, err := New(ctx, Config{Hosts: []string{"a", "b"}, ConnectRoot: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.SetDelay("a", 10*time.Millisecond); err != nil {
		t.Fatalf("SetDelay: %v", err)
	}
	if err := l.LinkDown("b"); err != nil {
		t.Fatalf("LinkDown: %v", err)
	}
	names := []string{l.Router}
	for _, h := range l.Hosts {
		names = append(names, h.Namespace)
	}
	ns := ipOut(t, "netns", "list")
	for _, n := range names {
		if !strings.Contains(ns, n) {
			t.Fatalf("namespace %s missing while the lab runs: %s", n, ns)
		}
	}
	if !strings.Contains(ipOut(t, "-4", "route", "show"), l.RootLink) {
		t.Fatalf("no root route via %s while the lab runs", l.RootLink)
	}

	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ns = ipOut(t, "netns", "list")
	for _, n := range names {
		if strings.Contains(ns, n) {
			t.Errorf("namespace %s left after Close: %s", n, ns)
		}
	}
	if out, err := exec.Command("ip", "link", "show", "dev", l.RootLink).CombinedOutput(); err == nil {
		t.Errorf("root link %s left after Close: %s", l.RootLink, out)
	}
	if routes := ipOut(t, "-4", "route", "show"); strings.Contains(routes, l.RootLink) || strings.Contains(routes, l.Subnet.String()) {
		t.Errorf("root route to %s left after Close: %s", l.Subnet, routes)
	}
	if after := ipOut(t, "rule", "show"); after != rulesBefore {
		t.Errorf("root rules changed:\nbefore:\n%s\nafter:\n%s", rulesBefore, after)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := l.Hosts[0].Do(func() error { return nil }); err == nil {
		t.Errorf("Do in a closed lab's host succeeded")
	}
}

func TestCleanupSweepsOnlyDeadRuns(t *testing.T) {
	requireRoot(t)
	prefix := fmt.Sprintf("nlsweep%d", os.Getpid())
	dead := deadPID(t)
	self := os.Getpid()
	// What crashed runs leave: a dead process's router and host, and a
	// router of this very process that no open lab owns.
	stale := []string{
		fmt.Sprintf("%s-%d-1", prefix, dead),
		fmt.Sprintf("%s-%d-1-server-1", prefix, dead),
		fmt.Sprintf("%s-%d-999999", prefix, self),
	}
	// What a sweep must not touch: a live process's lab (pid 1 always runs),
	// names it did not make, and another prefix's.
	kept := []string{
		fmt.Sprintf("%s-1-1", prefix),
		fmt.Sprintf("%s-x-1", prefix),
		fmt.Sprintf("%s-%d", prefix, dead),
		fmt.Sprintf("%sother-%d-1", prefix, dead),
	}
	for _, n := range append(slices.Clone(stale), kept...) {
		ipOut(t, "netns", "add", n)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
	}
	l := newLab(t, Config{Prefix: prefix, Hosts: []string{"a"}})
	ns := ipOut(t, "netns", "list")
	for _, n := range stale {
		if strings.Contains(ns, n+" ") || strings.HasSuffix(strings.TrimSpace(ns), n) {
			t.Errorf("New left the stale namespace %s", n)
		}
	}
	// A sweep while the lab runs leaves it alone.
	if err := Cleanup(context.Background(), prefix); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	have := map[string]bool{}
	for _, line := range strings.Split(ipOut(t, "netns", "list"), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			have[f[0]] = true
		}
	}
	for _, n := range append(kept, l.Router, l.Hosts[0].Namespace) {
		if !have[n] {
			t.Errorf("sweep removed %s", n)
		}
	}
	for _, n := range stale {
		if have[n] {
			t.Errorf("sweep left %s", n)
		}
	}
}

// deadPID returns a pid that no process has now.
func deadPID(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatalf("read pid_max: %v", err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("parse pid_max %q: %v", b, err)
	}
	for pid := max - 1; pid > 1; pid-- {
		if !processExists(pid) {
			return pid
		}
	}
	t.Fatalf("no free pid below %d", max)
	return 0
}

func TestNewRefusesBadConfig(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	for name, cfg := range map[string]Config{
		"no hosts":        {},
		"duplicate host":  {Hosts: []string{"a", "a"}},
		"empty host":      {Hosts: []string{""}},
		"slash in host":   {Hosts: []string{"a/b"}},
		"slash in prefix": {Prefix: "x/y", Hosts: []string{"a"}},
		"subnet too small": {Hosts: []string{"a", "b", "c", "d", "e"},
			Subnet: netip.MustParsePrefix("198.18.0.0/29")},
		"negative queue": {Hosts: []string{"a"}, MaxQueued: -1},
	} {
		if l, err := New(ctx, cfg); err == nil {
			l.Close()
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestSmallestSubnet(t *testing.T) {
	// A /29 holds exactly 4 hosts, the router and the root.
	p := netip.MustParsePrefix("198.19.255.248/29")
	l := newLab(t, Config{Hosts: []string{"a", "b", "c", "d"}, Subnet: p, ConnectRoot: true})
	var got []string
	for _, h := range l.Hosts {
		got = append(got, h.Addr.String())
	}
	want := []string{"198.19.255.250", "198.19.255.251", "198.19.255.252", "198.19.255.253"}
	if !slices.Equal(got, want) || l.RouterAddr.String() != "198.19.255.249" || l.RootAddr.String() != "198.19.255.254" {
		t.Fatalf("hosts %v router %s root %s; want %v, 198.19.255.249, 198.19.255.254", got, l.RouterAddr, l.RootAddr, want)
	}
	last := l.Hosts[3]
	echo(t, last)
	var d net.Dialer
	c, err := d.DialContext(context.Background(), "tcp", last.AddrPort(echoPort))
	if err != nil {
		t.Fatalf("root -> %s: %v", last.Addr, err)
	}
	c.Close()
}

// TestDelayAccuracy logs how close a connect time comes to the injected 2d,
// the figure the mesh report quotes, and holds the lower bound for each d.
func TestDelayAccuracy(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a", "b"}})
	a, b := l.Hosts[0], l.Hosts[1]
	echo(t, b)
	const samples = 7
	for _, d := range []time.Duration{5 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond} {
		if err := l.SetDelay("b", d); err != nil {
			t.Fatalf("SetDelay: %v", err)
		}
		ts := connectTimes(t, a, b.AddrPort(echoPort), samples)
		for _, took := range ts {
			if took < 2*d {
				t.Errorf("d=%v: connect took %v, under 2d", d, took)
			}
		}
		m := median(ts)
		if m > 2*d+time.Second {
			t.Errorf("d=%v: median connect %v, far over 2d = %v", d, m, 2*d)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		t.Logf("d=%v: connect median %v over 2d=%v: ratio %.4f, excess %v (min %v, max %v, n=%d)",
			d, m.Round(10*time.Microsecond), 2*d, float64(m)/float64(2*d), (m - 2*d).Round(10*time.Microsecond),
			ts[0].Round(10*time.Microsecond), ts[len(ts)-1].Round(10*time.Microsecond), samples)
	}
}

func TestCommandRunsInHost(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a"}})
	h := l.Hosts[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := h.Command(ctx, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)
	want := nsInode(t, nsPath(h.Namespace))
	// `ip netns exec` execs the program: the pid is sleep's own, so SIGSTOP
	// and SIGCONT reach the program itself, and it runs in the host.
	eventually(t, 10*time.Second, "sleep running in the host", func() error {
		comm, err := os.ReadFile("/proc/" + pid + "/comm")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(comm)); got != "sleep" {
			return fmt.Errorf("pid %s runs %q", pid, got)
		}
		if got := nsInode(t, "/proc/"+pid+"/ns/net"); got != want {
			return fmt.Errorf("pid %s in namespace %s, want %s", pid, got, want)
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	eventually(t, 10*time.Second, "sleep stopped", func() error {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return err
		}
		// The state follows the command in parentheses.
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); f[0] != "T" {
			return fmt.Errorf("state %s", f[0])
		}
		return nil
	})
	cmd.Process.Signal(syscall.SIGCONT)
}

func nsInode(t testing.TB, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

func TestDoLeavesNoThreadInAHost(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a"}})
	h := l.Hosts[0]
	own := nsInode(t, "/proc/thread-self/ns/net")
	inside := nsInode(t, nsPath(h.Namespace))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Do(func() error {
				if got := nsInode(t, "/proc/thread-self/ns/net"); got != inside {
					t.Errorf("Do ran in namespace %s, want the host's %s", got, inside)
				}
				if i%2 == 0 {
					return errors.New("fn failed")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if err := h.Do(func() error { return errors.New("boom") }); err == nil || err.Error() != "boom" {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	for _, task := range tasks {
		p := "/proc/self/task/" + task.Name() + "/ns/net"
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue // the thread has just ended
		}
		if got := fmt.Sprintf("%d:%d", st.Dev, st.Ino); got != own {
			t.Errorf("thread %s left in namespace %s, want %s", task.Name(), got, own)
		}
	}
}
