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

// OneRequestPerConnection: every request on a connection of its own, over
// HTTP/1.1, so each dials anew through the Service (a kept-alive
// connection to an API server that answers only errors is never reused).
func TestOneRequestPerConnection(t *testing.T) {
	var conns, http2 atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			http2.Add(1)
		}
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`, http.StatusServiceUnavailable)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	for _, c := range []struct {
		tune func(*rest.Config)
		want int32
	}{{nil, 1}, {OneRequestPerConnection, 3}} {
		conns.Store(0)
		http2.Store(0)
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
			t.Errorf("tuned %v: 3 requests on %d connections, want %d", c.tune != nil, got, c.want)
		}
		if n := http2.Load(); c.tune != nil && n > 0 {
			t.Errorf("tuned: %d requests over HTTP/2, want HTTP/1.1", n)
		}
	}
}
