// Package httpserve serves a component's /metrics, /healthz and /readyz on one
// mux, as the descheduler and node-problem-detector do.
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

// Server is a started listener; Addr is where it listens.
type Server struct {
	Addr string
	srv  *http.Server
	done chan error
}

// Start listens on addr and serves until Shutdown. ready reports why the
// component is not ready (nil when it is); /healthz answers as long as the
// process serves at all.
func Start(addr string, reg *prometheus.Registry, ready func() error, log *slog.Logger) (*Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
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
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
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

// Shutdown stops the server, waiting for requests in flight up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down metrics server: %w", err)
	}
	return <-s.done
}
