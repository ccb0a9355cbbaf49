// Package statuscheck reads the status fleet-role's controller publishes
// the way the end-to-end scenarios judge it: a host's reasons, the
// decision's, the swap a decision names, every host fit with a full
// window, and the bounds (in sample periods) within which a fault must
// show. It is harness: test/k3s stands on it (test/mesh holds its own
// bounds, in lab/fault/campaign's catalogue), and the campaign (so test/mesh),
// the demo and the bench wait for every host fit with it.
package statuscheck

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// HostOf is the host named name in st, or nil.
func HostOf(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

// ReasonOf is h's reason of signal about subject, or nil.
func ReasonOf(h *status.Host, signal, subject string) *status.Reason {
	for i := range h.Reasons {
		if r := &h.Reasons[i]; r.Signal == signal && r.Subject == subject {
			return r
		}
	}
	return nil
}

// DecisionReason is the decision's reason of signal about subject, or nil.
func DecisionReason(st *status.Status, signal, subject string) *status.Reason {
	for i := range st.Decision.Reasons {
		if r := &st.Decision.Reasons[i]; r.Signal == signal && r.Subject == subject {
			return r
		}
	}
	return nil
}

// NamedSwap is the swap a decision names: published (action swap), or
// named and held by the hysteresis (a steady reason on the leaving voter,
// "...: held until every voter has written again (for STANDBY)"). ok is
// false when it names none; in is empty when the held swap's detail names
// no standby.
func NamedSwap(st *status.Status) (out, in string, published, ok bool) {
	d := st.Decision
	if d.Action == status.ActionSwap {
		return d.Out, d.In, true, true
	}
	for _, r := range d.Reasons {
		if r.Signal == status.StepSteady && r.Subject != "" {
			if _, rest, found := strings.Cut(r.Detail, "(for "); found {
				in, _, _ = strings.Cut(rest, ")")
			}
			return r.Subject, in, false, true
		}
	}
	return "", "", false, false
}

// Brief is a status in one line: every host's verdict, and the decision,
// with what holds a host or the decision back.
func Brief(st *status.Status) string {
	var parts []string
	for _, h := range st.Hosts {
		p := h.Name + " " + string(h.Verdict)
		if h.Verdict != status.Fit {
			if r, ok := status.DecidingReason(h); ok {
				p += " (" + status.Summary(r) + ")"
			}
		}
		parts = append(parts, p)
	}
	d := st.Decision
	what := "decision " + d.Action
	if d.Action == status.ActionSwap {
		what += " " + d.Out + " -> " + d.In
	} else {
		for _, r := range d.Reasons {
			if !r.OK {
				what += ": " + status.Summary(r)
				break
			}
		}
	}
	return strings.Join(parts, "; ") + "; " + what
}

// Held is a host that keeps a status from every host fit, and why: its
// window not yet full, or its verdict other than fit with its deciding
// reason.
type Held struct {
	Host status.Host
	Why  []string
}

// HeldHosts are the hosts of st, but those named in skip, that are not fit
// with a full window of window samples, in the status's order.
func HeldHosts(st *status.Status, window int, skip ...string) []Held {
	var out []Held
	for _, h := range st.Hosts {
		if slices.Contains(skip, h.Name) {
			continue
		}
		var why []string
		if h.Samples < window {
			why = append(why, fmt.Sprintf("%d of %d samples", h.Samples, window))
		}
		if h.Verdict != status.Fit {
			w := string(h.Verdict)
			if r, ok := status.DecidingReason(h); ok {
				w += ": " + status.Summary(r)
			}
			why = append(why, w)
		}
		if len(why) > 0 {
			out = append(out, Held{Host: h, Why: why})
		}
	}
	return out
}

// EveryFit holds when st has a host, every host but those named in skip is
// fit with a full window of window samples, and the decision is none: the
// baseline every harness waits for before a fault, and again after it. Its
// error names every host that holds it and why.
func EveryFit(st *status.Status, window int, skip ...string) error {
	if len(st.Hosts) == 0 {
		return errors.New("no host in the status")
	}
	if held := HeldHosts(st, window, skip...); len(held) > 0 {
		var parts []string
		for _, h := range held {
			parts = append(parts, h.Host.Name+" "+strings.Join(h.Why, ", "))
		}
		return errors.New(strings.Join(parts, "; "))
	}
	if st.Decision.Action != status.ActionNone {
		return fmt.Errorf("every host is fit, but the decision is %s %s -> %s, want none", st.Decision.Action, st.Decision.Out, st.Decision.In)
	}
	return nil
}

// AllFit holds every one of hosts present with a full window and fit, no
// other host, and the decision none because every voter is fit.
func AllFit(st *status.Status, hosts []string, s settings.Settings) error {
	for _, name := range hosts {
		if HostOf(st, name) == nil {
			return fmt.Errorf("%s is not in the status", name)
		}
	}
	if len(st.Hosts) != len(hosts) {
		return fmt.Errorf("%d hosts in the status, want %d", len(st.Hosts), len(hosts))
	}
	if err := EveryFit(st, s.Window); err != nil {
		return err
	}
	r := DecisionReason(st, status.StepReplace, "")
	if r == nil || r.OK || r.Detail != "every voter is fit: nothing to replace" {
		return errors.New("the decision does not say that nothing is unfit")
	}
	return nil
}

// Periods is d in sample periods, to a tenth.
func Periods(d, period time.Duration) float64 {
	return math.Round(float64(d)/float64(period)*10) / 10
}

// DetectBound is the periods within which a delay on a host's links must
// show in a decision: the nearest-rank p of a window is its
// Rank(p, window)-th smallest sample, so it turns slow once
// window-Rank+1 samples are slow (2 of 20 at p95). A probe takes those
// within that many periods of the delay's start, the first of them
// possibly straddling it; the controller reads them within one more
// period; one more for a loaded machine (a probe on a slowed host needs
// round trips of twice the delay for its own API calls).
func DetectBound(s settings.Settings) (need int, bound float64) {
	need = s.Window - quantile.Rank(s.TailPercentile, s.Window) + 1
	return need, float64(need + 3)
}

// StaleBound is the periods within which a probe that stopped reporting
// is reported so: the stale limit is 3 periods of the entry unchanged as
// the controller sees it; it may first see the last write up to a period
// after the stop, and judges at its next tick: 5 periods, and one more for
// the document to be read.
const StaleBound = 3 + 3.0
