package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
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

// signalContext is the command's context, cancelled as well by SIGTERM (the
// kubelet stopping the pod) or SIGINT, so that a component writes what it
// holds before it exits, and ends as well when whoever ran the command ends
// its context.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
}

// part is one of a long-running component's parts: an informer, the metrics
// server, the loop. Its run returns when its context ends, or with the
// error that stopped it.
type part struct {
	name string
	run  func(context.Context) error
}

// runParts runs a component's parts under one errgroup tied to ctx, the
// component's lifetime, as every controller-runtime manager does: the first
// part to fail, or to stop while the component runs, ends the others (their
// context is cancelled) and the component returns its error, so that the
// process exits with it and is restarted, rather than go on without the
// part; when ctx ends, every part is told to stop. Either way runParts
// returns only once every part has.
func runParts(ctx context.Context, parts ...part) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, p := range parts {
		g.Go(func() error {
			err := p.run(gctx)
			switch {
			case err == nil && gctx.Err() == nil:
				err = errors.New("stopped while the component runs")
			case gctx.Err() != nil && errors.Is(err, context.Canceled):
				err = nil // it was told to stop, and did
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// serveMetrics starts /metrics, /healthz and /readyz, and routes, on addr, as a part that
// serves until the component ends; an empty addr serves nothing (no part).
// It listens at once, so that an address in use stops the command before
// anything else starts.
func serveMetrics(addr string, reg *prometheus.Registry, ready httpserve.Readiness, log *slog.Logger, routes ...httpserve.Route) ([]part, error) {
	if addr == "" {
		return nil, nil
	}
	srv, err := httpserve.Start(addr, reg, ready, log, routes...)
	if err != nil {
		return nil, err
	}
	log.Info("serving metrics", "address", srv.Addr)
	return []part{{"metrics server", srv.Run}}, nil
}

// Where each component serves /metrics: the port, and the environment
// variable the manifests fill from the downward API with the address to
// bind. The probe runs on the host's network, where listening on every
// interface would open the port on every address the node has; it binds the
// node's address (status.hostIP). The controller binds its pod's
// (status.podIP).
const (
	probeMetricsPort      = 9871
	probeMetricsEnv       = "HOST_IP"
	controllerMetricsPort = 9870
	controllerMetricsEnv  = "POD_IP"
)

// metricsAddressFlag adds --metrics-address, defaulting to env's address and
// port (an IPv6 address bracketed), or to every interface when env is unset.
// The returned check refuses an env that holds no IP address while the flag
// was left at that default.
func metricsAddressFlag(f *pflag.FlagSet, addr *string, env string, port int, what string) (check func() error) {
	def := ":" + strconv.Itoa(port)
	ip, set := os.LookupEnv(env)
	if set && ip != "" {
		def = net.JoinHostPort(ip, strconv.Itoa(port))
	}
	f.StringVar(addr, "metrics-address", def, "where to serve "+what+" (default $"+env+":"+strconv.Itoa(port)+
		" when "+env+" is set, from the downward API; else every interface; empty: nowhere)")
	return func() error {
		if !f.Changed("metrics-address") && set && ip != "" && net.ParseIP(ip) == nil {
			return usageErrorf("%s %q is no IP address: set it from the downward API or pass --metrics-address", env, ip)
		}
		return nil
	}
}
