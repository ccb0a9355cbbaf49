package controller

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/version"
)

// Metrics are the controller's Prometheus metrics, on a registry of its own.
// A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	verdict     *prometheus.GaugeVec
	samples     *prometheus.GaugeVec
	swap        *prometheus.GaugeVec
	records     *prometheus.GaugeVec
	recordIssue *prometheus.GaugeVec
	deciding    *prometheus.GaugeVec
	decidingLim *prometheus.GaugeVec
	held        *prometheus.GaugeVec
	tolerance   *prometheus.GaugeVec
	loops       *prometheus.CounterVec
	loopSeconds prometheus.Histogram
	writes      prometheus.Counter
	leader      prometheus.Gauge
	// The swap acting carries out (docs/acting.md): its phase and step,
	// when the step began and its deadline, and why the executor stalled.
	swapPhase    *prometheus.GaugeVec
	swapStarted  *prometheus.GaugeVec
	swapDeadline *prometheus.GaugeVec
	actingStall  *prometheus.GaugeVec
	// flaps and verdictChanges are the status memory's running counts,
	// which survive a restart in the status document.
	flaps, verdictChanges atomic.Int64
}

// decidingLabels name a host's deciding reason. No label value is a
// record's text: host, out and in are node names (the Nodes', which
// records cannot add to), subject a node name or empty, and the others a
// closed set (roles, verdicts, signals, steps, units, record issues).
var decidingLabels = []string{"host", "role", "verdict", "signal", "subject", "unit"}

// Verdicts, as the values the verdict metric takes a label for.
var verdicts = []string{"fit", "unfit", "unknown"}

// NewMetrics registers the controller's metrics on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_host_verdict", Help: "1 for the verdict each host has now, 0 for the others.",
		}, []string{"host", "role", "verdict"}),
		samples: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_host_samples", Help: "Samples in each host's window.",
		}, []string{"host"}),
		swap: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_swap", Help: "1 while the controller would swap voter out for standby in (dry-run: nothing is done).",
		}, []string{"out", "in"}),
		records: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_records", Help: "The probes' records: count (records), total_bytes and largest_bytes (of their entries), cap_bytes (the cap each is held to).",
		}, []string{"figure"}),
		recordIssue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_host_record_issue", Help: "1 while a host's record is why it has no full, fresh window: issue is missing, unreadable, refused (the API server refused the probe's write, or the decision refused its record), unprotected (the probe writes no samples: the API server did not refuse it a write to a record not its own), full (shrunk to fit its cap) or stale (unchanged for longer than entry_unchanged allows: the probe stopped writing).",
		}, []string{"host", "issue"}),
		// The deciding reason's numbers (status.DecidingReason: the one
		// furthest over its limit when unfit, closest to it when fit), so
		// that an alert and a dashboard can say by what and by how much.
		// One series per host; none for a reason without a number (a
		// failed connect, a link class, a missing entry).
		deciding: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_host_deciding_value", Help: "The measured value of the reason that decides each host's verdict, in unit (signal and subject name it, as the status's reasons do).",
		}, decidingLabels),
		decidingLim: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_host_deciding_limit", Help: "The limit the deciding reason's value is held to, in unit (docs/limits.md).",
		}, decidingLabels),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_decision_held", Help: "1 for each step of the decision that holds a swap back (the decision's reasons that are not ok: pinned, candidate, a gate_*, steady, ...); none while a swap is published.",
		}, []string{"step"}),
		// The failure tolerance four ways (status.FailureTolerance), so
		// that an alert can tell a fleet that lost its margin (lost
		// "unfit_and_unknown" at 0) from one built without any ("none" at
		// 0: one or two voters), and a dashboard show first the figure
		// the attribution gives ("implicated_and_unknown").
		tolerance: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_failure_tolerance", Help: "Voters that may still fail before etcd loses quorum, counting as lost: the unfit and unknown voters (lost=\"unfit_and_unknown\"), those less the voters unfit only by their links to a voter the attribution implicates (lost=\"implicated_and_unknown\"), only the unknown (lost=\"unknown\"), or none (lost=\"none\": what the voter count alone allows).",
		}, []string{"lost"}),
		loops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_role_decisions_total", Help: "Decision loops, by result.",
		}, []string{"result"}),
		loopSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleet_role_decision_seconds", Help: "Time one decision loop took, reads and write included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_role_status_writes_total", Help: "Writes of the status ConfigMap.",
		}),
		// Labelled by the plan ID (one series a swap, and the journal holds
		// one swap), node names and closed sets: no record's text.
		swapPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_swap_phase", Help: "1 for the phase and step of the swap acting carries out, or the last one (phase running, aborting, aborted, halted or done; step the one under way, or none); absent with acting off or plan, or before any swap.",
		}, []string{"plan", "out", "in", "phase", "step"}),
		swapStarted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_swap_step_started_timestamp_seconds", Help: "When the swap's step under way began (Unix seconds).",
		}, []string{"plan", "step"}),
		swapDeadline: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_swap_step_deadline_timestamp_seconds", Help: "When the swap's step under way must end (Unix seconds): past it the executor aborts the swap, or halts it from remove on.",
		}, []string{"plan", "step"}),
		actingStall: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_role_acting_stalled", Help: "1 while the controller, acting guided or auto, could not run the swap's executor at its last decision, by code (NoLease, NotLeading, NoJournal, JournalUnreadable, JournalConflict, ReadFailed, WriteFailed).",
		}, []string{"code"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_leader", Help: "1 while this controller holds the Lease and decides and writes the status, 0 while it waits to take it over; absent without leader election.",
		}),
	}
	flaps := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fleet_role_flaps_total", Help: "Swaps published at one decision and gone at the next, the voter set unchanged (the status's memory.flaps).",
	}, func() float64 { return float64(m.flaps.Load()) })
	changes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fleet_role_verdict_changes_total", Help: "Host verdicts that changed from one decision to the next (the status's memory.verdict_changes).",
	}, func() float64 { return float64(m.verdictChanges.Load()) })
	m.Registry.MustRegister(m.verdict, m.samples, m.swap, m.deciding, m.decidingLim, m.held, m.tolerance, m.records, m.recordIssue, m.loops, m.loopSeconds, m.writes, flaps, changes,
		m.swapPhase, m.swapStarted, m.swapDeadline, m.actingStall, version.Collector())
	return m
}

func (m *Metrics) observeLoop(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.loopSeconds.Observe(d.Seconds())
	if err != nil {
		m.loops.WithLabelValues("error").Inc()
		return
	}
	m.loops.WithLabelValues("ok").Inc()
}

func (m *Metrics) observeStatus(st *status.Status) {
	if m == nil {
		return
	}
	r := st.Records
	m.records.WithLabelValues("count").Set(float64(r.Count))
	m.records.WithLabelValues("total_bytes").Set(float64(r.TotalBytes))
	m.records.WithLabelValues("largest_bytes").Set(float64(r.LargestBytes))
	m.records.WithLabelValues("cap_bytes").Set(float64(r.CapBytes))
	m.recordIssue.Reset()
	for _, h := range st.Hosts {
		if issue := recordIssue(h); issue != "" {
			m.recordIssue.WithLabelValues(h.Name, issue).Set(1)
		}
	}
	t := st.FailureTolerance
	m.tolerance.WithLabelValues("unfit_and_unknown").Set(float64(t.Tolerance))
	m.tolerance.WithLabelValues("implicated_and_unknown").Set(float64(t.Attributed))
	m.tolerance.WithLabelValues("unknown").Set(float64(t.OptimisticTolerance))
	m.tolerance.WithLabelValues("none").Set(float64(t.DesignTolerance))
	m.flaps.Store(int64(st.Memory.Flaps))
	m.verdictChanges.Store(int64(st.Memory.VerdictChanges))
	// Hosts come and go: reset so that a removed host's series disappears.
	m.verdict.Reset()
	m.samples.Reset()
	for _, h := range st.Hosts {
		for _, v := range verdicts {
			val := 0.0
			if string(h.Verdict) == v {
				val = 1
			}
			m.verdict.WithLabelValues(h.Name, string(h.Role), v).Set(val)
		}
		m.samples.WithLabelValues(h.Name).Set(float64(h.Samples))
	}
	m.deciding.Reset()
	m.decidingLim.Reset()
	hosts := make(map[string]bool, len(st.Hosts))
	for _, h := range st.Hosts {
		hosts[h.Name] = true
	}
	for _, h := range st.Hosts {
		r, ok := status.DecidingReason(h)
		if !ok || r.Value == nil || r.Limit == nil {
			continue
		}
		l := []string{h.Name, string(h.Role), string(h.Verdict), r.Signal, labelSubject(r.Subject, hosts), r.Unit}
		m.deciding.WithLabelValues(l...).Set(*r.Value)
		m.decidingLim.WithLabelValues(l...).Set(*r.Limit)
	}
	m.observeActing(st.Acting)
	m.swap.Reset()
	m.held.Reset()
	if st.Decision.Action == status.ActionSwap {
		m.swap.WithLabelValues(st.Decision.Out, st.Decision.In).Set(1)
		return
	}
	for _, r := range st.Decision.Reasons {
		if !r.OK {
			m.held.WithLabelValues(r.Signal).Set(1)
		}
	}
}

// observeActing sets the swap's series from the journal the status
// carries.
func (m *Metrics) observeActing(a *acting.Status) {
	for _, g := range []*prometheus.GaugeVec{m.swapPhase, m.swapStarted, m.swapDeadline, m.actingStall} {
		g.Reset()
	}
	if a == nil {
		return
	}
	if a.Stall != nil {
		m.actingStall.WithLabelValues(string(a.Stall.Code)).Set(1)
	}
	j := a.Journal
	if j == nil {
		return
	}
	stepName := "none"
	if cur := j.Current(); cur != nil {
		stepName = string(cur.Name)
		if cur.Started != nil {
			m.swapStarted.WithLabelValues(j.PlanID, stepName).Set(float64(cur.Started.UnixMilli()) / 1000)
		}
		if cur.Deadline != nil {
			m.swapDeadline.WithLabelValues(j.PlanID, stepName).Set(float64(cur.Deadline.UnixMilli()) / 1000)
		}
	}
	m.swapPhase.WithLabelValues(j.PlanID, j.Out.Node, j.In.Node, string(j.Phase), stepName).Set(1)
}

// labelSubject is a reason's subject as a label value: a host's name, the
// other end of a link, or none. Every other subject is text a record chose
// (an interface, a directory, an etcd member ID no host claims), and a
// record that changed it every period would mint a series every period:
// the status has it.
func labelSubject(subject string, hosts map[string]bool) string {
	if hosts[subject] {
		return subject
	}
	return ""
}

// leading sets the leader gauge, registering it at the first call: a
// controller that does not run for the Lease exports none.
func (m *Metrics) leading(on bool) {
	if m == nil {
		return
	}
	if err := m.Registry.Register(m.leader); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.leader.Set(v)
}

// forgetDecision drops every series of the last decision: a replica that
// no longer leads decides nothing, and gauges left as its last decision
// set them would read, to an alert or a dashboard scraping every pod, as a
// second controller's current verdicts and swap. The counters stay: this
// process's own work (loops, writes), and the status memory's flaps and
// verdict changes, which only grow and which a follower does not move.
func (m *Metrics) forgetDecision() {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.verdict, m.samples, m.swap, m.records, m.recordIssue, m.deciding, m.decidingLim, m.held, m.tolerance,
		m.swapPhase, m.swapStarted, m.swapDeadline, m.actingStall} {
		g.Reset()
	}
}

func (m *Metrics) written() {
	if m == nil {
		return
	}
	m.writes.Inc()
}

// recordIssue names what is wrong with a host's record, from its reasons.
func recordIssue(h status.Host) string {
	for _, r := range h.Reasons {
		if r.OK {
			continue
		}
		switch r.Code {
		case status.CodeRecordMissing:
			return "missing"
		case status.CodeRecordUnreadable, status.CodeJudgingPanicked:
			return "unreadable"
		case status.CodeWriteRefused, status.CodeMemberClaimed:
			return "refused"
		case status.CodeRecordWithheld, status.CodeWithheldUnprotected:
			return "unprotected"
		case status.CodeRecordFull:
			return "full"
		case status.CodeEntryStale:
			return "stale"
		}
	}
	return ""
}
