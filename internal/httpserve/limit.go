package httpserve

import (
	"net"
	"sync"
	"sync/atomic"
)

// limitListener caps the connections a server holds at once, in all and from
// any one client address. A connection over either cap is accepted and
// closed at once, with a reset: it costs the server nothing lasting, and the
// kernel's accept queue keeps draining, so a client under its share is not
// left waiting behind a flood the way it would be if over-cap connections
// were left in the queue.
//
// A connection from the host itself (its client address is the address it
// reached: the kernel gives a connection to one of the host's own
// addresses that address as its source) counts only against its own
// address's share, never against the total. The kubelet checks a
// host-network pod that way, at the pod's address, which is the node's: so
// however many other hosts hold the total, the kubelet's liveness and
// readiness checks are served.
type limitListener struct {
	net.Listener
	max, perHost int

	mu   sync.Mutex
	open int
	// others counts the connections from other hosts: the ones the total
	// cap bounds.
	others   int
	byHost   map[string]int
	accepted atomic.Uint64
	refused  atomic.Uint64
}

func newLimitListener(l net.Listener, max, perHost int) *limitListener {
	return &limitListener{Listener: l, max: max, perHost: perHost, byHost: map[string]int{}}
}

// Accept returns the next connection within the caps, closing every one
// over them.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		own := host == hostOf(c.LocalAddr())
		if l.take(host, own) {
			l.accepted.Add(1)
			return &limitConn{Conn: c, release: func() { l.give(host, own) }}, nil
		}
		l.refused.Add(1)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: no TIME_WAIT left behind for a refused client
		}
		_ = c.Close()
	}
}

// take holds a place for a connection from host (own: from this host
// itself), or reports that its share or the total is full.
func (l *limitListener) take(host string, own bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (!own && l.max > 0 && l.others >= l.max) || (l.perHost > 0 && l.byHost[host] >= l.perHost) {
		return false
	}
	l.open++
	if !own {
		l.others++
	}
	l.byHost[host]++
	return true
}

func (l *limitListener) give(host string, own bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if !own {
		l.others--
	}
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

// hostOf is the client's IP address without its port: connections from one
// address share its per-host share.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn gives its place back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
