// Package connect measures the TCP connect time from this host to each of a
// list of peers (an etcd member's peer port, host:port), one attempt each, all
// at once, each bounded by a timeout. A connect that is refused or times out is
// a failure carried with its error, never a time: a time would read as a fast
// peer.
//
// ParsePeer and the Result type are the pure part; Measure is the thin part
// that dials. The dialer is injectable so that tests and the network-namespace
// mesh can dial from inside a namespace.
package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// ErrBadPeer marks a peer address that is not host:port with a numeric port.
var ErrBadPeer = errors.New("peer must be host:port with a port from 1 to 65535")

// ParsePeer checks that peer is host:port with a non-empty host and a numeric
// port from 1 to 65535, and returns the two parts. A service name such as
// "host:etcd" is refused: the probe must dial the same port on every host, not
// whatever each host's /etc/services says.
func ParsePeer(peer string) (host string, port uint16, err error) {
	h, p, err := net.SplitHostPort(peer)
	if err != nil {
		return "", 0, fmt.Errorf("peer %q: %w: %w", peer, ErrBadPeer, err)
	}
	if h == "" {
		return "", 0, fmt.Errorf("peer %q: %w: no host", peer, ErrBadPeer)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("peer %q: %w: port %q", peer, ErrBadPeer, p)
	}
	return h, uint16(n), nil
}

// Result is one peer's reading: either OK with the connect time in seconds,
// or not OK with the error that stopped the connect.
type Result struct {
	Peer    string
	OK      bool
	Seconds float64
	Err     string
}

// resultJSON is Result as it is printed and stored: connect_seconds only on a
// connect that succeeded and error only on one that failed, so that no reader
// can take a zero time for a fast peer.
type resultJSON struct {
	Peer    string   `json:"peer"`
	OK      bool     `json:"ok"`
	Seconds *float64 `json:"connect_seconds,omitempty"`
	Err     string   `json:"error,omitempty"`
}

// MarshalJSON writes {peer, ok, connect_seconds} or {peer, ok, error}.
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{Peer: r.Peer, OK: r.OK}
	if r.OK {
		s := r.Seconds
		j.Seconds = &s
	} else {
		j.Err = r.Err
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{Peer: j.Peer, OK: j.OK, Err: j.Err}
	if j.Seconds != nil {
		r.Seconds = *j.Seconds
	}
	return nil
}

// DialFunc dials one address, as (*net.Dialer).DialContext does. The context
// carries the timeout.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Measure connects to every peer at once, each with its own timeout, and
// returns one Result per peer in the order given. It uses a plain net.Dialer.
func Measure(ctx context.Context, peers []string, timeout time.Duration) []Result {
	return MeasureWith(ctx, nil, peers, timeout)
}

// MeasureWith is Measure with the dialer given; nil means a plain net.Dialer.
// Only the connect is timed: the dial returning is the handshake completing,
// and the connection is closed at once, sending nothing.
func MeasureWith(ctx context.Context, dial DialFunc, peers []string, timeout time.Duration) []Result {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	results := make([]Result, len(peers))
	var wg sync.WaitGroup
	for i, peer := range peers {
		wg.Go(func() {
			results[i] = measureOne(ctx, dial, peer, timeout)
		})
	}
	wg.Wait()
	return results
}

func measureOne(ctx context.Context, dial DialFunc, peer string, timeout time.Duration) Result {
	if _, _, err := ParsePeer(peer); err != nil {
		return Result{Peer: peer, Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := wall.Now()
	conn, err := dial(ctx, "tcp", peer)
	elapsed := wall.Since(start)
	if err != nil {
		msg := err.Error()
		if timedOut(ctx, err) {
			// net says only "i/o timeout"; the limit belongs in the reason.
			msg = fmt.Sprintf("no connection within %s: %s", timeout, msg)
		}
		return Result{Peer: peer, Err: msg}
	}
	conn.Close()
	return Result{Peer: peer, OK: true, Seconds: elapsed.Seconds()}
}

// timedOut tells a connect that ran out of time. The dialer's own deadline on
// the socket can fire before the context's timer marks the context done, so
// the error is asked too, not only the context.
func timedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}
