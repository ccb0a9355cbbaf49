package probe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/version"
)

// Metrics are the probe's own Prometheus metrics, on a registry of its own so
// that nothing global leaks in. A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	samples      prometheus.Counter
	readingFails *prometheus.CounterVec
	writes       *prometheus.CounterVec
	entryBytes   prometheus.Gauge
	capBytes     prometheus.Gauge
	shrunk       prometheus.Gauge
	tickSeconds  prometheus.Histogram
	wakeupLate   prometheus.Histogram
	lastWrite    prometheus.Gauge
	policy       policyMetrics
}

// NewMetrics registers the probe's metrics on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_role_probe_samples_total", Help: "Samples taken.",
		}),
		readingFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_role_probe_reading_failures_total", Help: "Readings that failed, by reading.",
		}, []string{"reading"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_role_probe_writes_total", Help: "Writes of the record, by result: ok, refused (by the API server: the admission policy, size or validation) or error (not taken: unreachable, timed out).",
		}, []string{"result"}),
		entryBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_entry_bytes", Help: "Size of the entry last written to the record.",
		}),
		capBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_entry_cap_bytes", Help: "The record's cap: the largest entry the probe writes (docs/records.md).",
		}),
		shrunk: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_entry_shrunk_samples", Help: "Oldest samples left out of the last write so that the record fits its cap (0: the record is not full).",
		}),
		tickSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleet_role_probe_tick_seconds", Help: "Time one period's work took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		wakeupLate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleet_role_probe_wakeup_late_seconds",
			Help: "Each sample's largest lateness of a timer due once a heartbeat interval (the wakeup_late signal, docs/limits.md): how late this host ran the probe.",
			// From 1 ms, past the heartbeat and election timeouts of k3s
			// (500 ms, 5 s) to 32 s, as fleet_role_probe_tick_seconds.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		lastWrite: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_last_write_timestamp_seconds", Help: "When the entry was last written.",
		}),
	}
	m.Registry.MustRegister(m.samples, m.readingFails, m.writes, m.entryBytes, m.capBytes, m.shrunk, m.tickSeconds, m.wakeupLate, m.lastWrite, version.Collector())
	m.policy = newPolicyMetrics(m.Registry)
	// Every result appears from the start, so that a rate over them is
	// defined before the first refusal.
	for _, r := range []string{"ok", "refused", "error"} {
		m.writes.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) sampled() {
	if m == nil {
		return
	}
	m.samples.Inc()
}

func (m *Metrics) readingFailed(reading Reading) {
	if m == nil {
		return
	}
	m.readingFails.WithLabelValues(string(reading)).Inc()
}

func (m *Metrics) written(bytes, limit, shrunk int) {
	if m == nil {
		return
	}
	m.writes.WithLabelValues("ok").Inc()
	m.entryBytes.Set(float64(bytes))
	m.capBytes.Set(float64(limit))
	m.shrunk.Set(float64(shrunk))
	m.lastWrite.SetToCurrentTime()
}

func (m *Metrics) writeFailed(result string) {
	if m == nil {
		return
	}
	m.writes.WithLabelValues(result).Inc()
}

// wokeLate observes a sample's wake-up lateness, when it has one.
func (m *Metrics) wokeLate(seconds *float64) {
	if m == nil || seconds == nil {
		return
	}
	m.wakeupLate.Observe(*seconds)
}

func (m *Metrics) observeTick(d time.Duration) {
	if m == nil {
		return
	}
	m.tickSeconds.Observe(d.Seconds())
}
