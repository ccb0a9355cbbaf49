// Package httpserve serves a component's /metrics, /healthz and /readyz on one
// mux, as the descheduler and node-problem-detector do.
//
// The probe serves on the host's network, where anything that reaches the
// node reaches the port: every request and connection is bounded (Limits),
// so that no client, however hostile, can grow the server past its share of
// the pod's memory. The derivations are in docs/limits.md, "Metrics servers
// and the etcd scrape".
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// electionTimeout is k3s's etcd election timeout (5000 ms, docs/facts.md "etcd
// timing"): ten times the largest round trip fit between voters (500 ms).
// The servers' timeouts derive from it.
const electionTimeout = 5 * time.Second

// Limits bound what a client may make the server hold. Zero in a field means
// no bound: only tests start a server with zero Limits, to measure what the
// bounds save.
type Limits struct {
	// ReadTimeout bounds reading a request, headers and body, from the
	// connection's first byte (or the end of its idle wait).
	ReadTimeout time.Duration
	// WriteTimeout bounds the handler and the writing of its response.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sent no next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's header block (net/http reads 4096
	// bytes of slack beyond it).
	MaxHeaderBytes int
	// MaxConns caps the connections held at once from other hosts;
	// MaxConnsPerHost those from one client address, the host's own
	// included. Connections over either are closed at once. The host's own
	// connections (the kubelet's checks of a host-network pod among them)
	// count only against their address's share, so that no number of
	// other hosts can take their places.
	MaxConns, MaxConnsPerHost int
	// MaxMetricsInFlight caps the /metrics gathers at once; more are
	// answered 503 at once.
	MaxMetricsInFlight int
}

// DefaultLimits are the bounds both components serve with (docs/limits.md,
// "Metrics servers and the etcd scrape").
var DefaultLimits = Limits{
	// A GET has no body and a header block of a few hundred bytes: from a
	// client on a fit link (round trip at most a tenth of the election
	// timeout) it arrives in one or two round trips. One election timeout
	// is five times that and more.
	ReadTimeout: electionTimeout,
	// The handler gathers a registry of a few dozen series in
	// milliseconds and the response is a few KiB: two election timeouts,
	// which is also Prometheus' default scrape_timeout (10 s), after which
	// the scraper has gone.
	WriteTimeout: 2 * electionTimeout,
	// Shorter than the shortest usual scrape interval (15 s, the default
	// sample period too), so that no scraper's connection holds a place
	// between its scrapes; a scrape then costs one TCP handshake.
	IdleTimeout: electionTimeout,
	// Prometheus' request with a ServiceAccount bearer token is under
	// 2 KiB: four times that.
	MaxHeaderBytes: 8 << 10,
	// What one client address needs at once: a scrape and a retry while
	// its old connection closes (2), or the kubelet's liveness and
	// readiness probes, which come from the node's address (2).
	MaxConnsPerHost: 4,
	// Sixteen other client addresses at their full share, and the host's
	// own share beside them: 68 connections. At the worst measured cost of
	// a held connection (about 30 KiB, a full header block being read)
	// that is about 2 MiB, against the probe's headroom of about 56 MiB
	// (128 MiB limit, 49.2 MiB peak, 22 MiB of the fsync file's page
	// cache).
	MaxConns: 64,
	// The two replicas of an HA Prometheus pair, an operator, and one spare.
	MaxMetricsInFlight: 4,
}

// Server is a started listener; Addr is where it listens.
type Server struct {
	Addr string
	srv  *http.Server
	ln   *limitListener
	done chan error
}

// Route is one more path a component serves beside its metrics: the
// controller's status page.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Readiness reports why a component is not ready (err), or, when it is,
// what a reader of /readyz should know beside it (note: a follower says
// who leads; empty when there is nothing to add).
type Readiness func() (note string, err error)

// Plain is the Readiness of a component with nothing to add when ready.
func Plain(ready func() error) Readiness {
	return func() (string, error) { return "", ready() }
}

// Start listens on addr and serves until Shutdown, within DefaultLimits.
// ready answers /readyz: 503 with why the component is not ready, or 200
// "ok" and its note; /healthz answers as long as the process serves at
// all. routes are served on the same mux, within the same limits.
func Start(addr string, reg *prometheus.Registry, ready Readiness, log *slog.Logger, routes ...Route) (*Server, error) {
	return startLimits(addr, reg, ready, log, DefaultLimits, routes...)
}

// startLimits is Start within the given limits (the tests' servers, which
// measure what the bounds save).
func startLimits(addr string, reg *prometheus.Registry, ready Readiness, log *slog.Logger, lim Limits, routes ...Route) (*Server, error) {
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:            reg,
		MaxRequestsInFlight: lim.MaxMetricsInFlight,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		note, err := ready()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if note != "" {
			fmt.Fprintln(w, "ok: "+note)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	s := &Server{
		Addr: ln.Addr().String(),
		ln:   newLimitListener(ln, lim.MaxConns, lim.MaxConnsPerHost),
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: lim.ReadTimeout,
			ReadTimeout:       lim.ReadTimeout,
			WriteTimeout:      lim.WriteTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    lim.MaxHeaderBytes,
		},
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil && log != nil {
			log.Error("metrics server stopped", "err", err)
		}
		s.done <- err
	}()
	return s, nil
}

// shutdownTimeout bounds Run's wait for requests in flight once its context
// ends: a scrape takes at most WriteTimeout (two election timeouts), and a
// pod's termination grace period (30 s by default) must leave the loop time
// to write what it holds.
const shutdownTimeout = 5 * time.Second

// Run is the server as one of a component's parts (internal/cli): it serves
// until ctx is done, then shuts down, waiting up to shutdownTimeout for the
// requests in flight. It returns the error that stopped the server early
// (the listener failing), so that the component ends with it rather than
// go on without its metrics and probes.
func (s *Server) Run(ctx context.Context) error {
	select {
	case err := <-s.done:
		if err == nil {
			err = errors.New("stopped")
		}
		return fmt.Errorf("metrics server on %s: %w", s.Addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}

// Shutdown stops the server, waiting for requests in flight up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down metrics server: %w", err)
	}
	return <-s.done
}
