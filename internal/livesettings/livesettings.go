// Package livesettings follows the settings ConfigMap (fleet-role-settings)
// while a component runs, and hands each valid change to it, to apply at its
// next period boundary: the change read as the file was at start (the
// environment and the flags over it), validated as at start, and taken whole
// or not at all. A change that fails validation or sets a key that applies
// only at a restart (settings.RestartOnly) is refused, and the settings in
// force stay; the component says so in its log, its metrics and (the
// controller) the status.
package livesettings

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Watch is the settings ConfigMap as a watch serves it
// (kube.SettingsInformer).
type Watch interface {
	Changed() <-chan struct{}
	Current() (settings.Version, bool)
}

// The results, as the settings package names them.
const (
	Applied     = settings.SourceApplied
	Unchanged   = settings.SourceUnchanged
	Invalid     = settings.SourceInvalid
	RestartOnly = settings.SourceRestartOnly
	Absent      = settings.SourceAbsent
)

// Follower follows a Watch and hands each outcome to Apply.
type Follower struct {
	Watch Watch
	// ConfigMap names the ConfigMap, namespace/name, for the state.
	ConfigMap string
	// Load reads a settings file's content as the component read its
	// file at start (settings.Flags.LoadFile), validating it.
	Load func(data []byte) (settings.Settings, error)
	// Apply is the component's: it takes the settings now in force (the
	// new ones after a change, else the same) and the state, and applies
	// them at its next period boundary. It must not block.
	Apply   func(settings.Settings, settings.Source)
	Log     *slog.Logger
	Metrics *Metrics
	// Clock dates a refusal: the component's clock; nil is the real one.
	Clock clock.PassiveClock

	current settings.Settings
	state   settings.Source
	lastRV  string
}

// Start sets the settings the component started with; Run then follows
// the changes from there.
func (f *Follower) Start(s settings.Settings) {
	f.current = s
	f.state = settings.Source{ConfigMap: f.ConfigMap}
}

// Run follows the Watch until ctx ends.
func (f *Follower) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.Watch.Changed():
			if v, ok := f.Watch.Current(); ok {
				f.Observe(v)
			}
		}
	}
}

// Observe judges one version of the ConfigMap, hands the outcome to Apply
// and returns its result. A version already judged is not judged again.
func (f *Follower) Observe(v settings.Version) settings.SourceResult {
	if !v.Absent && v.ResourceVersion != "" && v.ResourceVersion == f.lastRV {
		return Unchanged
	}
	f.lastRV = v.ResourceVersion
	refuse := func(r settings.SourceResult, err error) settings.SourceResult {
		f.state.Refused = &settings.Refusal{ResourceVersion: v.ResourceVersion, Result: r, Message: err.Error(), At: f.now()}
		f.Log.Error("settings change refused; the settings in force stay", "configmap", f.ConfigMap, "resource_version", v.ResourceVersion, "result", string(r), "err", err)
		f.Metrics.observe(r, true)
		f.Apply(f.current, f.state)
		return r
	}
	if v.Absent {
		return refuse(Absent, errors.New("the ConfigMap or its "+settings.ConfigMapKey+" is gone: a component restarted now would not start on the settings in force; put it back"))
	}
	next, err := f.Load(v.Data)
	if err != nil {
		return refuse(Invalid, err)
	}
	keys, err := settings.LiveChange(f.current, next)
	if err != nil {
		return refuse(RestartOnly, err)
	}
	wasRefused := f.state.Refused != nil
	f.state.Refused = nil
	f.state.ResourceVersion = v.ResourceVersion
	if len(keys) == 0 {
		f.Metrics.observe(Unchanged, false)
		if wasRefused {
			f.Log.Info("settings refusal cleared: the ConfigMap holds the settings in force again", "configmap", f.ConfigMap, "resource_version", v.ResourceVersion)
		}
		f.Apply(f.current, f.state)
		return Unchanged
	}
	f.current = next
	f.Log.Info("settings changed; applying at the next period boundary", "configmap", f.ConfigMap, "resource_version", v.ResourceVersion, "changed", keys)
	f.Metrics.observe(Applied, false)
	f.Apply(next, f.state)
	return Applied
}

func (f *Follower) now() time.Time {
	if f.Clock != nil {
		return f.Clock.Now()
	}
	return clock.RealClock{}.Now()
}

// Metrics are a Follower's series, registered with the component's.
type Metrics struct {
	changes *prometheus.CounterVec
	refused prometheus.Gauge
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_role_settings_changes_total",
			Help: "Versions of the settings ConfigMap seen while running, by result: Applied, Unchanged, or refused as Invalid, RestartOnly (it sets a key that applies only at a restart) or Absent.",
		}, []string{"result"}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_settings_refused",
			Help: "1 while the latest version of the settings ConfigMap is refused and the settings in force are older than it.",
		}),
	}
	reg.MustRegister(m.changes, m.refused)
	return m
}

func (m *Metrics) observe(r settings.SourceResult, refused bool) {
	if m == nil {
		return
	}
	m.changes.WithLabelValues(string(r)).Inc()
	if refused {
		m.refused.Set(1)
	} else {
		m.refused.Set(0)
	}
}
