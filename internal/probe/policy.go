package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/kube"
)

// Fail closed (docs/records.md, "Fail closed"). A probe's own record is
// worth something only while no other probe can write it: the admission
// policy fleet-role-probe-records holds each probe to its node's record,
// and RBAC alone would let any probe rewrite or delete every record (the
// status and the settings are in another namespace, where RBAC lets a
// probe write nothing). A cluster where the policy is not in force (its
// plugin off, its binding deleted, an install that skipped it) looks the
// same to every probe until something is written, so the probe asks: at
// start and then once every entry_unchanged (the bound after which the
// controller calls a record stale), it makes a server-side dry run the
// policy must refuse (kube.PolicyCheck), every period until one has seen
// it refused; the check due once every entry_unchanged after that runs
// beside the writes (recheckBeside). Until a check has seen it refused it
// writes no samples; when
// one sees it admitted it replaces its record by a marker that
// holds no samples and says why (entry.Entry.Withheld), says so in its
// log, its readiness and fleet_role_probe_policy_enforced, and keeps
// sampling into memory, to write its window again once a check sees the
// refusal come back. The controller's status names the host unknown with
// that reason, and no swap is judged on it.

// policy is what the probe knows of the admission policy's hold. The
// writes and the check beside them write it, under Prober.mu, which Ready
// reads it under.
type policy struct {
	checked   bool // a check has had its answer: refused or admitted
	protected bool // the last answer: refused
	why       error
	last      time.Time // when the last check ran, by this process's monotonic clock
	// rechecking is closed when the check running beside the writes
	// (recheckBeside) has ended; nil while none runs.
	rechecking chan struct{}
}

// policyDue says whether a check is due: every period until a check has
// seen the refusals (at start; after one that could not tell; while the
// policy is not in force, as right after an install, before the API server
// has loaded it), and then once every entry_unchanged. seen: the last
// check saw the refusal, so the one due is that every entry_unchanged,
// which runs beside the writes (recheckBeside).
func (p *Prober) policyDue() (due, seen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen = p.pol.checked && p.pol.protected && p.pol.why == nil
	return !seen || p.cfg.Clock.Since(p.pol.last) >= p.cfg.Settings.StaleAfter().Duration(), seen
}

// policyAllows runs the check when it is due and says whether the probe may
// write its samples. Without a Policy (an in-memory store) there is nothing
// to ask and it may.
func (p *Prober) policyAllows(ctx context.Context) bool {
	if p.cfg.Policy == nil {
		return true
	}
	if p.ownerNow().Name == "" {
		return false // no plan yet: nothing to write, and no owner to check with
	}
	if due, seen := p.policyDue(); due {
		if seen {
			p.recheckBeside(ctx)
		} else {
			p.checkPolicy(ctx, true)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pol.checked && p.pol.protected
}

// recheckBeside runs the check that falls due once every entry_unchanged,
// after the last one saw the refusal, beside the writes rather than before
// the next one. Why: the check is a round trip over this host's path to
// the API server; on a slow leader's host it was added, every
// entry_unchanged, to a write that already crosses that path six times
// (docs/limits.md, "A slow leader"). Nothing is trusted longer for it:
// the writes go on as the last check found, as they would have until it
// was due, and a check that finds the write to another's record admitted
// stops them from its answer on. The marker that says so is written by the
// next write's check, a period later at most: with the policy seen off, a
// check falls due every period and runs before the write again.
func (p *Prober) recheckBeside(ctx context.Context) {
	p.mu.Lock()
	if p.pol.rechecking != nil {
		p.mu.Unlock()
		return
	}
	done := make(chan struct{})
	p.pol.rechecking = done
	p.mu.Unlock()
	go func() {
		defer close(done)
		p.checkPolicy(ctx, false)
		p.mu.Lock()
		p.pol.rechecking = nil
		p.mu.Unlock()
	}()
}

// checkPolicy asks the API server whether it refuses this probe a write to
// a record not its node's. mark: write the withheld marker when it does
// not (the check before a write; the one beside the writes leaves it to
// the next).
func (p *Prober) checkPolicy(ctx context.Context, mark bool) {
	err := p.cfg.Policy.CheckRefused(ctx, p.ownerNow())
	p.mu.Lock()
	was, marked := p.pol, p.rec.holds == holdsWithheld
	p.pol.last, p.pol.why = p.cfg.Clock.Now(), err
	switch {
	case err == nil:
		p.pol.checked, p.pol.protected = true, true
	case errors.Is(err, kube.ErrAdmitted):
		p.pol.checked, p.pol.protected = true, false
		// While the policy is not in force any probe may rewrite this
		// record: what it holds is no longer known to be this probe's,
		// and the window is written again once the refusal comes back.
		if p.rec.holds != holdsUnread {
			p.rec = recordState{holds: holdsForeign}
		}
	}
	p.mu.Unlock()
	p.cfg.Metrics.policyChecked(err)
	switch {
	case err == nil && was.checked && !was.protected:
		p.log.Info("the API server refuses a write to a record not this node's again: writing samples again")
	case err == nil && !was.checked:
		p.log.Info("the API server refuses this probe a write to a record not its node's, as the admission policy must: writing samples")
	case errors.Is(err, kube.ErrAdmitted):
		if !marked && mark {
			// Once a spell, by the check that writes the marker: the one
			// beside the writes leaves both to the next period's.
			p.log.Error("writing no samples: the API server did not refuse a write to a record not this node's", "err", err)
		}
		// At every check of the spell (every period), not once: with the
		// policy off any probe may overwrite this record with samples of
		// its making, and the controller holds the whole fleet unprotected
		// for as long as it sees a marker come back.
		if mark {
			p.writeWithheld(ctx, err)
		}
	case err != nil:
		p.log.Warn("could not ask the API server whether it refuses a write to a record not this node's; will ask again next period", "err", err)
	}
}

// Ready reports whether the probe writes its samples: an error while the
// API server has not been seen refusing it a write to a record not its own
// (not yet asked, or admitted), for the pod's readiness.
func (p *Prober) Ready() error {
	if p.cfg.Policy == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.pol.checked && p.pol.why != nil:
		return fmt.Errorf("not writing: the API server has not yet been asked whether it refuses a write to a record not this node's: %w", p.pol.why)
	case !p.pol.checked:
		return errors.New("not writing: the API server has not yet been asked whether it refuses a write to a record not this node's")
	case !p.pol.protected:
		return fmt.Errorf("writing no samples: %w", p.pol.why)
	}
	return nil
}

// policyMetrics are the check's metrics.
type policyMetrics struct {
	enforced prometheus.Gauge
	checks   *prometheus.CounterVec
}

func newPolicyMetrics(reg *prometheus.Registry) policyMetrics {
	m := policyMetrics{
		enforced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleet_role_probe_policy_enforced",
			Help: "1 while the API server refuses this probe a write to a record not its node's (the admission policy fleet-role-probe-records in force), 0 once it admitted one: the probe then writes no samples. Absent until the first check answers.",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_role_probe_policy_checks_total",
			Help: "Checks of the admission policy by server-side dry run, by result: refused (as it must be), admitted (the policy is not in force) or error (could not tell).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.checks)
	for _, r := range []string{"refused", "admitted", "error"} {
		m.checks.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) policyChecked(err error) {
	if m == nil {
		return
	}
	switch {
	case err == nil:
		m.policy.checks.WithLabelValues("refused").Inc()
		m.policy.setEnforced(m.Registry, 1)
	case errors.Is(err, kube.ErrAdmitted):
		m.policy.checks.WithLabelValues("admitted").Inc()
		m.policy.setEnforced(m.Registry, 0)
	default:
		m.policy.checks.WithLabelValues("error").Inc()
	}
}

// setEnforced sets the gauge, registering it at its first answer, so that
// it is absent rather than 0 before anything is known.
func (m *policyMetrics) setEnforced(reg *prometheus.Registry, v float64) {
	if err := reg.Register(m.enforced); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return
	}
	m.enforced.Set(v)
}
