package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// start serves within lim on loopback; ready is /readyz's answer.
func start(t *testing.T, lim Limits, ready Readiness) *Server {
	t.Helper()
	if ready == nil {
		ready = func() (string, error) { return "", nil }
	}
	s, err := startLimits("127.0.0.1:0", prometheus.NewRegistry(), ready, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// dialFrom connects to addr from the loopback address from (127.0.0.0/8 is
// all loopback on Linux: each address is a client host of its own).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const getHealthz = "GET /healthz HTTP/1.1\r\nHost: fleet-role\r\n\r\n"

// askFrom dials addr from a local address and asks for /healthz. A
// connection the server closes on arrival fails either way: at the request,
// or already at the dial when the server's reset reaches the client before
// connect returns (seen on a loaded machine), so a reset dial is returned as
// the error; any other dial error fails the test.
func askFrom(t *testing.T, from, addr string) (*http.Response, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil, err
	}
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return roundTrip(c, getHealthz, 5*time.Second)
}

// roundTrip sends req on c and reads one response; an error means the
// server closed or reset the connection instead of answering.
func roundTrip(c net.Conn, req string, within time.Duration) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// closedByServer waits for the server's end of c to close: a read that ends
// in EOF or a reset, not in the test's own deadline.
func closedByServer(c net.Conn, within time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(within))
	_, err := c.Read(make([]byte, 1))
	if err == nil {
		return errors.New("the server sent data")
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("still open after %v", within)
	}
	return nil
}

func TestDefaultLimitsDerivation(t *testing.T) {
	l := DefaultLimits
	// Each figure as docs/limits.md derives it.
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ReadTimeout (one election timeout)", l.ReadTimeout, 5 * time.Second},
		{"WriteTimeout (two election timeouts)", l.WriteTimeout, 10 * time.Second},
		{"IdleTimeout (one election timeout)", l.IdleTimeout, 5 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// The idle timeout must end an idle connection before the next scrape
	// at the shortest usual interval (15 s) would reuse it.
	if l.IdleTimeout >= 15*time.Second {
		t.Errorf("IdleTimeout %v not under the 15 s scrape interval", l.IdleTimeout)
	}
	if l.MaxHeaderBytes != 8<<10 || l.MaxConnsPerHost != 4 || l.MaxConns != 16*l.MaxConnsPerHost || l.MaxMetricsInFlight != 4 {
		t.Errorf("caps %+v", l)
	}
}

// The connection caps at, just under and just over: in all, per host, and
// the host's own share beside them.
func TestConnectionCaps(t *testing.T) {
	lim := DefaultLimits
	lim.MaxConns, lim.MaxConnsPerHost = 6, 3
	s := start(t, lim, nil)

	// Per host: three connections from 127.0.0.2 are served (the third
	// is at the cap), the fourth is closed on arrival.
	var held []net.Conn
	for i := 1; i <= lim.MaxConnsPerHost; i++ {
		c := dialFrom(t, "127.0.0.2", s.Addr)
		if _, err := roundTrip(c, getHealthz, 5*time.Second); err != nil {
			t.Fatalf("connection %d of %d from one host: %v", i, lim.MaxConnsPerHost, err)
		}
		held = append(held, c)
	}
	if resp, err := askFrom(t, "127.0.0.2", s.Addr); err == nil {
		t.Fatalf("connection %d from one host (cap %d) answered %s", lim.MaxConnsPerHost+1, lim.MaxConnsPerHost, resp.Status)
	}
	// Another host still has its share.
	for i := 1; i <= lim.MaxConns-lim.MaxConnsPerHost; i++ {
		from := "127.0.0.3"
		if i == lim.MaxConnsPerHost { // the last place in all, from a third host
			from = "127.0.0.4"
		}
		c := dialFrom(t, from, s.Addr)
		if _, err := roundTrip(c, getHealthz, 5*time.Second); err != nil {
			t.Fatalf("connection %d in all (cap %d): %v", lim.MaxConnsPerHost+i, lim.MaxConns, err)
		}
		held = append(held, c)
	}
	if open := s.Conns().Open; open != lim.MaxConns {
		t.Fatalf("%d connections open, want %d (the cap)", open, lim.MaxConns)
	}
	// In all: the seventh, from a host with no connection yet, is closed.
	if resp, err := askFrom(t, "127.0.0.5", s.Addr); err == nil {
		t.Fatalf("connection %d in all (cap %d) answered %s", lim.MaxConns+1, lim.MaxConns, resp.Status)
	}
	if c := s.Conns(); c.Open != lim.MaxConns || c.Refused != 2 {
		t.Errorf("open %d refused %d, want %d and 2", c.Open, c.Refused, lim.MaxConns)
	}
	// The host's own connections (the server listens on 127.0.0.1, and
	// these come from it, as the kubelet's checks of a host-network pod
	// come from the node's address to itself) are served while other hosts
	// hold the whole cap, up to their own address's share and not past it.
	for i := 1; i <= lim.MaxConnsPerHost; i++ {
		c := dialFrom(t, "127.0.0.1", s.Addr)
		if _, err := roundTrip(c, getHealthz, 5*time.Second); err != nil {
			t.Fatalf("the host's own connection %d of %d, with other hosts at the cap: %v", i, lim.MaxConnsPerHost, err)
		}
		defer c.Close()
	}
	if resp, err := askFrom(t, "127.0.0.1", s.Addr); err == nil {
		t.Fatalf("the host's own connection %d (its share %d) answered %s", lim.MaxConnsPerHost+1, lim.MaxConnsPerHost, resp.Status)
	}
	// Nor do the host's own places give other hosts any more.
	if resp, err := askFrom(t, "127.0.0.6", s.Addr); err == nil {
		t.Fatalf("connection %d from other hosts (cap %d), beside the host's own, answered %s", lim.MaxConns+1, lim.MaxConns, resp.Status)
	}
	if c := s.Conns(); c.Open != lim.MaxConns+lim.MaxConnsPerHost || c.Refused != 4 {
		t.Errorf("open %d refused %d, want %d and 4", c.Open, c.Refused, lim.MaxConns+lim.MaxConnsPerHost)
	}
	// A place freed is a place given: close one of 127.0.0.2's and it
	// connects again.
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s.Conns().Open < lim.MaxConns+lim.MaxConnsPerHost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection never gave its place back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := roundTrip(dialFrom(t, "127.0.0.2", s.Addr), getHealthz, 5*time.Second); err != nil {
		t.Errorf("after one of its connections closed, 127.0.0.2: %v", err)
	}
}

// The timeouts just under and just over. A margin of 40% either side keeps
// the test off the edge on a shared, loaded machine.
func TestTimeouts(t *testing.T) {
	const d = 500 * time.Millisecond
	under, over := d*6/10, d*14/10
	lim := DefaultLimits
	lim.ReadTimeout, lim.WriteTimeout, lim.IdleTimeout = d, d, d

	t.Run("read", func(t *testing.T) {
		s := start(t, lim, nil)
		half := len(getHealthz) / 2
		for _, c := range []struct {
			pause  time.Duration
			served bool
		}{{under, true}, {over, false}} {
			conn := dialFrom(t, "127.0.0.1", s.Addr)
			if _, err := io.WriteString(conn, getHealthz[:half]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(c.pause) // the slow client is the case under test
			resp, err := roundTrip(conn, getHealthz[half:], 5*time.Second)
			if served := err == nil && resp.StatusCode == http.StatusOK; served != c.served {
				t.Errorf("request finished after %v (read timeout %v): served %v (%v), want %v", c.pause, d, served, err, c.served)
			}
		}
	})

	t.Run("idle", func(t *testing.T) {
		s := start(t, lim, nil)
		for _, c := range []struct {
			pause  time.Duration
			served bool
		}{{under, true}, {over, false}} {
			conn := dialFrom(t, "127.0.0.1", s.Addr)
			if _, err := roundTrip(conn, getHealthz, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			time.Sleep(c.pause) // the idle client is the case under test
			_, err := roundTrip(conn, getHealthz, 5*time.Second)
			if served := err == nil; served != c.served {
				t.Errorf("second request after %v idle (idle timeout %v): served %v (%v), want %v", c.pause, d, served, err, c.served)
			}
		}
		// The server closes an idle connection by itself, within the
		// timeout and the margin.
		conn := dialFrom(t, "127.0.0.1", s.Addr)
		if _, err := roundTrip(conn, getHealthz, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := closedByServer(conn, over); err != nil {
			t.Errorf("idle connection: %v (idle timeout %v)", err, d)
		}
	})

	t.Run("write", func(t *testing.T) {
		// /readyz answers after the handler's pause: a handler slower
		// than the write timeout gets no response out.
		pause := make(chan time.Duration, 1)
		s := start(t, lim, func() (string, error) { time.Sleep(<-pause); return "", nil })
		for _, c := range []struct {
			pause  time.Duration
			served bool
		}{{under, true}, {over, false}} {
			pause <- c.pause
			conn := dialFrom(t, "127.0.0.1", s.Addr)
			resp, err := roundTrip(conn, "GET /readyz HTTP/1.1\r\nHost: fleet-role\r\n\r\n", 5*time.Second)
			if served := err == nil && resp.StatusCode == http.StatusOK; served != c.served {
				t.Errorf("handler took %v (write timeout %v): served %v (%v), want %v", c.pause, d, served, err, c.served)
			}
		}
	})

	t.Run("header bytes", func(t *testing.T) {
		s := start(t, DefaultLimits, nil)
		// net/http reads MaxHeaderBytes and 4096 bytes of slack for the
		// request line and header block; one byte more is refused 431.
		limit := DefaultLimits.MaxHeaderBytes + 4096
		request := func(n int) string {
			head := "GET /healthz HTTP/1.1\r\nHost: fleet-role\r\nX-Pad: "
			return head + strings.Repeat("x", n-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
		}
		for _, c := range []struct {
			n    int
			want int
		}{{limit - 1, http.StatusOK}, {limit, http.StatusOK}, {limit + 1, http.StatusRequestHeaderFieldsTooLarge}} {
			req := request(c.n)
			if len(req) != c.n {
				t.Fatalf("request of %d bytes, want %d", len(req), c.n)
			}
			resp, err := roundTrip(dialFrom(t, "127.0.0.1", s.Addr), req, 5*time.Second)
			if err != nil || resp.StatusCode != c.want {
				t.Errorf("header block of %d bytes (cap %d + 4096): %v %v, want %d", c.n, DefaultLimits.MaxHeaderBytes, resp, err, c.want)
			}
		}
	})
}

// Run serves until its context ends and then shuts the server down; a
// server whose listener fails under it ends Run with that error, at once,
// rather than leave the component running without its metrics.
func TestRunEndsWithItsContextOrItsListener(t *testing.T) {
	for _, fail := range []bool{false, true} {
		s, err := startLimits("127.0.0.1:0", prometheus.NewRegistry(), Plain(func() error { return nil }), nil, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		if code, _, err := getURL("http://" + s.Addr + "/healthz"); err != nil || code != 200 {
			t.Fatalf("/healthz while running: %d %v", code, err)
		}
		if fail {
			s.ln.Close() // the listener fails under the server
		} else {
			cancel()
		}
		select {
		case err := <-done:
			if fail && (err == nil || !strings.Contains(err.Error(), s.Addr)) {
				t.Errorf("listener closed: Run returned %v, want an error naming %s", err, s.Addr)
			}
			if !fail && err != nil {
				t.Errorf("context ended: Run returned %v, want nil", err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Run did not return within a minute (listener failed: %v)", fail)
		}
		cancel()
		if _, _, err := getURL("http://" + s.Addr + "/healthz"); err == nil {
			t.Errorf("the server still answers after Run returned (listener failed: %v)", fail)
		}
	}
}

// getURL fetches url on a new connection, within two seconds.
func getURL(url string) (int, string, error) {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// /readyz: 200 "ok" when ready with nothing to add, 200 "ok: NOTE" when
// ready with a note (a follower naming the leader), 503 with the reason
// when not ready.
func TestReadyzSaysItsNote(t *testing.T) {
	for _, c := range []struct {
		name     string
		note     string
		err      error
		code     int
		wantBody string
	}{
		{"ready", "", nil, 200, "ok\n"},
		{"ready with a note", "following: a holds the lease", nil, 200, "ok: following: a holds the lease\n"},
		{"not ready", "ignored", errors.New("not leading: forbidden"), 503, "not leading: forbidden\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, DefaultLimits, func() (string, error) { return c.note, c.err })
			code, body, err := getURL("http://" + s.Addr + "/readyz")
			if err != nil || code != c.code || body != c.wantBody {
				t.Errorf("/readyz: %d %q %v, want %d %q", code, body, err, c.code, c.wantBody)
			}
		})
	}
}
