// Package tcptest holds the TCP ends the connect tests measure against: a
// listener that accepts everything, and an address where nothing listens.
// internal/connect's unit tests and its network-namespace tests in
// test/integration/connect share them.
package tcptest

import (
	"net"
	"testing"
)

// AcceptAll accepts connections on l until it is closed and reports each.
func AcceptAll(l net.Listener, accepted chan<- string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		accepted <- l.Addr().String()
		c.Close()
	}
}

// ClosedPort returns an address on host where nothing listens: a port the
// kernel just handed out and that was closed again.
func ClosedPort(t testing.TB, listen func(network, addr string) (net.Listener, error), host string) string {
	t.Helper()
	l, err := listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
