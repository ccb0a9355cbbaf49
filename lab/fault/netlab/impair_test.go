//go:build linux

package netlab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"testing"
	"time"
)

// TestLinkDelay holds that a link's delay slows that link alone, in both
// directions, and that removing it takes its host out of the TUN.
func TestLinkDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	l := newLab(t, Config{Hosts: []string{"a", "b", "c"}})
	a, b, c := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	for _, h := range l.Hosts {
		echo(t, h)
	}
	if err := l.SetLinkDelay("a", "b", d); err != nil {
		t.Fatalf("SetLinkDelay(a, b): %v", err)
	}
	if n := countDelayRules(t, l); n != 4 {
		t.Fatalf("%d delay rules with the link a-b delayed, want 4 (a's and b's)", n)
	}
	for _, pair := range [][2]*Host{{a, b}, {b, a}} {
		for _, took := range connectTimes(t, pair[0], pair[1].AddrPort(echoPort), 3) {
			if took < 2*d || took > 2*d+2*time.Second {
				t.Errorf("connect %s -> %s took %v, want at least 2d = %v and not far over", pair[0].Name, pair[1].Name, took, 2*d)
			}
		}
	}
	// The other links of a and b are not delayed, though both hosts' packets
	// now pass through the TUN.
	for _, pair := range [][2]*Host{{a, c}, {c, b}} {
		if fast := slices.Min(connectTimes(t, pair[0], pair[1].AddrPort(echoPort), 5)); fast >= d {
			t.Errorf("fastest connect %s -> %s took %v with only a-b delayed, want far under %v", pair[0].Name, pair[1].Name, fast, d)
		}
	}
	// A host's own delay adds to its link's.
	const db = 30 * time.Millisecond
	if err := l.SetDelay("b", db); err != nil {
		t.Fatal(err)
	}
	for _, took := range connectTimes(t, a, b.AddrPort(echoPort), 3) {
		if took < 2*(d+db) {
			t.Errorf("connect a -> b took %v, under 2(d+db) = %v", took, 2*(d+db))
		}
	}
	if err := l.SetLinkDelay("b", "a", 0); err != nil { // either order names the link
		t.Fatalf("SetLinkDelay(b, a, 0): %v", err)
	}
	if n := countDelayRules(t, l); n != 2 {
		t.Fatalf("%d delay rules with only b delayed, want 2", n)
	}
	if err := l.SetDelay("b", 0); err != nil {
		t.Fatal(err)
	}
	if n := countDelayRules(t, l); n != 0 {
		t.Fatalf("%d delay rules left, want 0", n)
	}
	if fast := slices.Min(connectTimes(t, a, b.AddrPort(echoPort), 5)); fast >= d {
		t.Errorf("fastest connect a -> b after removing the link delay took %v, want under %v", fast, d)
	}

	for _, bad := range []struct {
		a, b string
		d    time.Duration
	}{{"a", "a", d}, {"a", "nobody", d}, {"nobody", "a", d}, {"a", "b", -time.Nanosecond}} {
		if err := l.SetLinkDelay(bad.a, bad.b, bad.d); err == nil {
			t.Errorf("SetLinkDelay(%q, %q, %v) accepted", bad.a, bad.b, bad.d)
		}
	}
}

// TestCutLink holds that a cut link discards what crosses it, silently and
// in both directions, while both its ends reach every other host and the
// root namespace.
func TestCutLink(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a", "b", "c"}, ConnectRoot: true})
	a, b, c := l.Hosts[0], l.Hosts[1], l.Hosts[2]
	for _, h := range l.Hosts {
		echo(t, h)
	}
	if err := l.CutLink("a", "b"); err != nil {
		t.Fatalf("CutLink(a, b): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const probe = 500 * time.Millisecond
	for _, pair := range [][2]*Host{{a, b}, {b, a}} {
		pctx, pcancel := context.WithTimeout(ctx, probe)
		conn, err := pair[0].Dial(pctx, "tcp", pair[1].AddrPort(echoPort))
		pcancel()
		if err == nil {
			conn.Close()
			t.Fatalf("%s -> %s connected across the cut", pair[0].Name, pair[1].Name)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s -> %s: %v, want a timeout (silent loss)", pair[0].Name, pair[1].Name, err)
		}
	}
	for _, pair := range [][2]*Host{{a, c}, {b, c}, {c, a}} {
		connectTimes(t, pair[0], pair[1].AddrPort(echoPort), 1)
	}
	for _, h := range []*Host{a, b} {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", h.AddrPort(echoPort))
		if err != nil {
			t.Errorf("root -> %s with a-b cut: %v", h.Name, err)
			continue
		}
		conn.Close()
	}
	if s := l.Stats(); s.Cut == 0 {
		t.Errorf("stats %+v: no packet counted as cut", s)
	}
	if err := l.MendLink("b", "a"); err != nil {
		t.Fatalf("MendLink(b, a): %v", err)
	}
	if n := countDelayRules(t, l); n != 0 {
		t.Fatalf("%d delay rules after MendLink, want 0", n)
	}
	eventually(t, 10*time.Second, "a -> b after MendLink", func() error {
		_, err := connectTime(ctx, a, b.AddrPort(echoPort))
		return err
	})
}

// TestLoss holds that a host's loss rate drops that share of its packets,
// each on its own: the count lost of n datagrams is binomial, so it is judged
// within five standard deviations (a false failure about once in 3.5
// million runs), and that a rate of 1 drops everything.
func TestLoss(t *testing.T) {
	const (
		n = 4000
		p = 0.3
	)
	l := newLab(t, Config{Hosts: []string{"a", "b"}, ConnectRoot: true})
	a, b := l.Hosts[0], l.Hosts[1]
	echo(t, b)
	var conn net.Conn
	if err := b.Do(func() error {
		pc, err := net.ListenPacket("udp4", b.AddrPort(echoPort))
		if err != nil {
			return err
		}
		t.Cleanup(func() { pc.Close() })
		go func() { // drain, so that b's socket never drops for want of room
			buf := make([]byte, 64)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
			}
		}()
		return nil
	}); err != nil {
		t.Fatalf("udp listener in b: %v", err)
	}
	if err := a.Do(func() error {
		var err error
		conn, err = net.Dial("udp4", b.AddrPort(echoPort))
		return err
	}); err != nil {
		t.Fatalf("udp socket in a: %v", err)
	}
	defer conn.Close()

	if err := l.SetLoss("b", p); err != nil {
		t.Fatalf("SetLoss(b, %v): %v", p, err)
	}
	before := l.Stats()
	for i := range n {
		if _, err := conn.Write([]byte{byte(i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i%64 == 63 {
			// Let the TUN's reader keep up: a datagram the TUN's own queue
			// dropped would be neither lost nor forwarded. A pause is not
			// enough on a busy machine (the reader may not run for tens of
			// milliseconds), so no more than half the device's queue of
			// 500 (Linux's default txqueuelen for a TUN) is ever in flight.
			const inFlight = 250
			eventually(t, 10*time.Second, "the TUN's reader keeping up", func() error {
				now := l.Stats()
				if judged := (now.Lost - before.Lost) + (now.Forwarded - before.Forwarded); int(judged) < i+1-inFlight {
					return fmt.Errorf("%d of %d sent judged", judged, i+1)
				}
				return nil
			})
		}
	}
	var after Stats
	eventually(t, 10*time.Second, "every datagram judged", func() error {
		after = l.Stats()
		if got := (after.Lost - before.Lost) + (after.Forwarded - before.Forwarded); got < n {
			return errors.New("not yet")
		}
		return nil
	})
	lost := float64(after.Lost - before.Lost)
	judged := lost + float64(after.Forwarded-before.Forwarded)
	mean, sd := judged*p, math.Sqrt(judged*p*(1-p))
	if math.Abs(lost-mean) > 5*sd {
		t.Errorf("lost %.0f of %.0f datagrams at p = %v: want %.0f within 5 sd (%.0f)", lost, judged, p, mean, 5*sd)
	}
	t.Logf("loss %v: lost %.0f of %.0f (expected %.0f, sd %.1f)", p, lost, judged, mean, sd)

	if err := l.SetLoss("b", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if c, err := a.Dial(ctx, "tcp", b.AddrPort(echoPort)); err == nil {
		c.Close()
		t.Fatalf("a -> b connected with every packet of b lost")
	}
	if err := l.SetLoss("b", 0); err != nil {
		t.Fatal(err)
	}
	if n := countDelayRules(t, l); n != 0 {
		t.Fatalf("%d delay rules after SetLoss(b, 0), want 0", n)
	}
	connectTimes(t, a, b.AddrPort(echoPort), 1)

	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if err := l.SetLoss("b", bad); err == nil {
			t.Errorf("SetLoss(b, %v) accepted", bad)
		}
	}
	if err := l.SetLoss("nobody", p); err == nil {
		t.Errorf("SetLoss(nobody) accepted")
	}
}

// TestClear holds that Clear removes every rule at once.
func TestClear(t *testing.T) {
	l := newLab(t, Config{Hosts: []string{"a", "b", "c"}})
	if err := l.SetDelay("a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLoss("b", 0.1); err != nil {
		t.Fatal(err)
	}
	if err := l.CutLink("b", "c"); err != nil {
		t.Fatal(err)
	}
	if n := countDelayRules(t, l); n != 6 {
		t.Fatalf("%d delay rules, want 6", n)
	}
	if err := l.Clear(); err != nil {
		t.Fatalf("Clear: %v", err)
	}
	if n := countDelayRules(t, l); n != 0 {
		t.Fatalf("%d delay rules after Clear, want 0", n)
	}
	if l.Delay("a") != 0 {
		t.Errorf("Delay(a) = %v after Clear", l.Delay("a"))
	}
}
