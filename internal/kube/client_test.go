package kube

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// RedialAfterFailure: over HTTP/1.1, a connection is kept while its
// requests succeed, and never reused after one answered with a server
// error (an API server whose etcd member was removed answers so at once):
// the next request dials anew through the Service.
func TestRedialAfterFailure(t *testing.T) {
	for _, c := range []struct {
		tune   func(*rest.Config)
		status int
		want   int32
	}{
		{nil, http.StatusServiceUnavailable, 1},                // HTTP/2: one connection, errors or not
		{RedialAfterFailure, http.StatusOK, 1},                 // kept alive while requests succeed
		{RedialAfterFailure, http.StatusServiceUnavailable, 3}, // dropped after each server error
		{RedialAfterFailure, http.StatusNotFound, 1},           // a client error is no fault of the server's
	} {
		// A server of its own for each case: client-go shares one
		// transport among clients of the same configuration.
		var conns, http2 atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 1 {
				http2.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(c.status)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1"}`)
		}))
		srv.EnableHTTP2 = true
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.StartTLS()
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		if c.tune != nil {
			c.tune(cfg)
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			res, err := hc.Get(srv.URL + "/api/v1/namespaces/x/configmaps/y")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		if got := conns.Load(); got != c.want {
			t.Errorf("tuned %v, answers %d: 3 requests on %d connections, want %d", c.tune != nil, c.status, got, c.want)
		}
		if n := http2.Load(); c.tune != nil && n > 0 {
			t.Errorf("tuned: %d requests over HTTP/2, want HTTP/1.1", n)
		}
		srv.Close()
	}
}
