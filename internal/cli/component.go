package cli

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/prometheus/client_golang/prometheus"
)

// loadSettings applies the settings file, the environment and the flags: an
// unreadable file exits 1, any other settings error 2.
func loadSettings(sf *settings.Flags) (settings.Settings, error) {
	s, err := sf.Load(os.LookupEnv)
	if err != nil {
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			return s, err
		}
		return s, usageError(err)
	}
	return s, nil
}

// newLogger is the structured logger both long-running components use.
func newLogger(w io.Writer, component string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil)).With("component", component)
}

// signalContext is cancelled by SIGTERM (the kubelet stopping the pod) or
// SIGINT, so that a component writes what it holds before it exits.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// serveMetrics starts /metrics, /healthz and /readyz on addr; an empty addr
// serves nothing. The returned stop function shuts the server down.
func serveMetrics(addr string, reg *prometheus.Registry, ready func() error, log *slog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	srv, err := httpserve.Start(addr, reg, ready, log)
	if err != nil {
		return nil, err
	}
	log.Info("serving metrics", "address", srv.Addr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
