package controller

import (
	"context"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
)

// markerSource is a record source that counts the versions of each record
// its watch delivered as a probe's withheld marker (kube.RecordInformer).
type markerSource interface {
	Markers() map[string]uint64
}

// unheldSource is a record source that counts records it does not hold,
// their nodes unable to vote (kube.RecordInformer built with
// NewRecordInformerHolding).
type unheldSource interface {
	Unheld() map[string]int
}

// unheldOf is what src counts and does not hold, nil for a source that
// holds every record.
func unheldOf(src kube.RecordSource) map[string]int {
	if u, ok := src.(unheldSource); ok {
		return u.Unheld()
	}
	return nil
}

// guard is what the controller knows itself of the guard that holds each
// probe to its own record, for decide.Input.Protection (docs/records.md,
// Fail closed): its own read of the admission policy, once every
// entry_unchanged as the probes' dry runs are, and the markers its watch
// saw between two decisions.
type guard struct {
	read    kube.PolicyReader // nil: nothing to read with
	state   kube.PolicyState
	checked bool      // state is a read's answer
	readAt  time.Time // the last read, answered or not
	failed  bool      // the last read failed (logged once a spell)
	markers map[string]uint64
}

// protection reads the policy when a read is due, and names the hosts
// whose marker count grew since the previous decision.
func (c *Controller) protection(ctx context.Context, now time.Time) decide.Protection {
	g := &c.guard
	if g.read != nil && (g.readAt.IsZero() || now.Sub(g.readAt) >= c.cfg.Settings.StaleAfter().Duration()) {
		g.readAt = now
		// Bounded as the status write of the same decision is, by the
		// client's request timeout, and tried once every entry_unchanged.
		st, err := g.read.Read(ctx)
		switch {
		case err != nil:
			// An install without the grant, or an API server that did not
			// answer: the records speak alone until a read is answered.
			if !g.failed {
				c.log.Warn("could not read the admission policy "+kube.PolicyName+"; the records' own markers alone say whether they are protected", "err", err)
			}
			g.failed, g.checked = true, false
		default:
			if st.InForce != g.state.InForce || !g.checked {
				if st.InForce {
					c.log.Info("the admission policy " + kube.PolicyName + " and its binding are in force")
				} else {
					c.log.Error("the admission policy "+kube.PolicyName+" is not in force: no record is trusted to name a swap", "why", st.Why)
				}
			}
			g.state, g.checked, g.failed = st, true, false
		}
	}
	p := decide.Protection{Checked: g.checked, InForce: g.state.InForce, Why: g.state.Why}
	if src, ok := c.cfg.Records.(markerSource); ok {
		now := src.Markers()
		for node, n := range now {
			if n > g.markers[node] {
				p.Markers = append(p.Markers, node)
			}
		}
		slices.Sort(p.Markers)
		g.markers = now
	}
	return p
}
