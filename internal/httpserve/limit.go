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
type limitListener struct {
	net.Listener
	max, perHost int

	mu       sync.Mutex
	open     int
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
		if l.take(host) {
			l.accepted.Add(1)
			return &limitConn{Conn: c, release: func() { l.give(host) }}, nil
		}
		l.refused.Add(1)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: no TIME_WAIT left behind for a refused client
		}
		_ = c.Close()
	}
}

func (l *limitListener) take(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.max > 0 && l.open >= l.max) || (l.perHost > 0 && l.byHost[host] >= l.perHost) {
		return false
	}
	l.open++
	l.byHost[host]++
	return true
}

func (l *limitListener) give(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
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
