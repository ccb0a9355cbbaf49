package probe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the probe's own Prometheus metrics, on a registry of its own so
// that nothing global leaks in. A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	samples      prometheus.Counter
	readingFails *prometheus.CounterVec
	writes       *prometheus.CounterVec
	entryBytes   prometheus.Gauge
	tickSeconds  prometheus.Histogram
	lastWrite    prometheus.Gauge
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
			Name: "fleet_role_probe_writes_total", Help: "Writes of the entry, by result.",
		}, []string{"result"}),
		entryBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_entry_bytes", Help: "Size of the entry last written.",
		}),
		tickSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleet_role_probe_tick_seconds", Help: "Time one period's work took.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		lastWrite: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_last_write_timestamp_seconds", Help: "When the entry was last written.",
		}),
	}
	m.Registry.MustRegister(m.samples, m.readingFails, m.writes, m.entryBytes, m.tickSeconds, m.lastWrite)
	return m
}

func (m *Metrics) sampled() {
	if m == nil {
		return
	}
	m.samples.Inc()
}

func (m *Metrics) readingFailed(reading string) {
	if m == nil {
		return
	}
	m.readingFails.WithLabelValues(reading).Inc()
}

func (m *Metrics) written(bytes int) {
	if m == nil {
		return
	}
	m.writes.WithLabelValues("ok").Inc()
	m.entryBytes.Set(float64(bytes))
	m.lastWrite.SetToCurrentTime()
}

func (m *Metrics) writeFailed() {
	if m == nil {
		return
	}
	m.writes.WithLabelValues("error").Inc()
}

func (m *Metrics) observeTick(d time.Duration) {
	if m == nil {
		return
	}
	m.tickSeconds.Observe(d.Seconds())
}
