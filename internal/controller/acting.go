package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The controller's side of acting (docs/acting.md): with acting guided or
// auto, each decision reads the journal, the approval and the actuators'
// reports, runs one round of the pure executor (acting.Next), and writes
// what it returns: the journal first, conditioned on the resourceVersion it
// was read at and only while this controller's term lasts, then the remove
// annotation. The status carries the journal as written.

// steady follows since when the decision has published the same swap (or
// named the same leader to replace for want of a standby: a leadership
// move's plan) without a break, for acting auto's approval. It lives in memory only: a
// restarted controller counts the window again, which only delays.
type steady struct {
	out, in string
	since   time.Time
}

func (s *steady) observe(d status.Decision, now time.Time) time.Time {
	out, in := d.Out, d.In
	if d.Action != status.ActionSwap {
		// A leadership move's plan is steady while the same voter would
		// be replaced for want of a fit standby.
		out, in = kube.LeadOut(d), ""
	}
	if out == "" {
		*s = steady{}
		return time.Time{}
	}
	if s.out != out || s.in != in || s.since.IsZero() {
		*s = steady{out: out, in: in, since: now}
	}
	return s.since
}

// actingRead is what acting reads before the plan is drawn: the approval
// (spent once a swap of that plan ended), the reports, and the journal.
type actingRead struct {
	read    kube.ActingRead
	journal *acting.Journal
	rv      string
	stall   *acting.Stall
}

func (c *Controller) readActing(ctx context.Context, st *status.Status, now time.Time) *actingRead {
	r := &actingRead{}
	r.read.SteadySince = c.steady.observe(st.Decision, now)
	store := c.cfg.Swap
	j, rv, err := store.Journal(ctx)
	switch {
	case errors.Is(err, kube.ErrNotFound):
		r.stall = &acting.Stall{Code: acting.StallNoJournal, Detail: fmt.Sprintf("no ConfigMap %s in %s: install deploy/acting (docs/acting.md, \"Turn acting on\")", acting.JournalConfigMap, c.cfg.Settings.Namespace)}
		return r
	case err != nil && rv != "":
		r.stall = &acting.Stall{Code: acting.StallJournalUnreadable, Detail: err.Error()}
		return r
	case err != nil:
		r.stall = &acting.Stall{Code: acting.StallReadFailed, Detail: err.Error()}
		return r
	}
	r.journal, r.rv = j, rv
	approved, err := store.Approved(ctx)
	if err != nil {
		r.stall = &acting.Stall{Code: acting.StallReadFailed, Detail: err.Error()}
		return r
	}
	if j != nil && spent(j, approved) {
		// An approval is for one swap: once a swap of that plan ended
		// (done or aborted), the operator approves again for another try.
		approved = ""
	}
	r.read.Approved = approved
	reports, bad, err := store.Reports(ctx)
	if err != nil {
		r.stall = &acting.Stall{Code: acting.StallReadFailed, Detail: err.Error()}
		return r
	}
	if len(bad) > 0 {
		c.log.Warn("actuator records unreadable; read as no report", "records", bad)
	}
	r.read.Reports = reports
	return r
}

// spent: the approval names a swap the journal recalls as ended.
func spent(j *acting.Journal, approved string) bool {
	if approved == "" {
		return false
	}
	if j.PlanID == approved && !j.Phase.Open() {
		return true
	}
	for _, p := range j.Past {
		if p.PlanID == approved {
			return true
		}
	}
	return false
}

// act runs one round of the executor on w and writes what it returns.
func (c *Controller) act(ctx context.Context, st *status.Status, w acting.World, r *actingRead, nodes []corev1.Node) {
	a := st.Acting
	a.Journal = r.journal
	if r.stall != nil {
		a.Stall = r.stall
		return
	}
	if c.term == nil {
		a.Stall = &acting.Stall{Code: acting.StallNoLease, Detail: "the controller runs for no Lease (--leader-elect=false): nothing would fence its commands"}
		return
	}
	// The published plan is judged as the executor judges it: with the
	// cooldown and the daily count the journal recalls (a plan shown ready
	// while the executor holds it for the cooldown would say nothing of
	// why nothing begins).
	if a.Plan != nil {
		a.Plan = acting.Draft(acting.WithPast(w, r.journal), c.cfg.Settings.Acting)
	}
	term := c.term.writer.Term
	out := acting.Next(r.journal, w, c.cfg.Settings.Acting, term)
	j := r.journal
	if out.Journal != nil {
		until := c.term.el.validUntil()
		if until.IsZero() || !c.cfg.Clock.Now().Before(until) {
			a.Stall = &acting.Stall{Code: acting.StallNotLeading, Detail: "this controller's term ended before the journal was written"}
			return
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		rv, err := c.cfg.Swap.WriteJournal(wctx, out.Journal, r.rv)
		cancel()
		if err != nil {
			code := acting.StallWriteFailed
			if errors.Is(err, kube.ErrConflict) {
				code = acting.StallJournalConflict
			}
			a.Stall = &acting.Stall{Code: code, Detail: err.Error()}
			return
		}
		r.rv, j = rv, out.Journal
		c.logJournal(r.journal, j)
		c.cfg.Events.ObserveSwap(r.journal, j, nodes)
	}
	a.Journal = j
	if out.Annotate != "" && j != nil {
		if err := c.cfg.Swap.RequestRemoval(ctx, out.Annotate, j.PlanID); err != nil {
			// The journal says remove is under way: the next round finds
			// no request on the Node and makes it then.
			a.Stall = &acting.Stall{Code: acting.StallWriteFailed, Detail: err.Error()}
			return
		}
		c.log.Info("swap: asked k3s to remove the leaving voter's etcd member", "plan", j.PlanID, "node", out.Annotate, "annotation", acting.RemoveAnnotation)
	}
}

// logJournal logs each event the round added to the journal's history.
func (c *Controller) logJournal(before, after *acting.Journal) {
	from := 0
	if before != nil && before.PlanID == after.PlanID && before.Started.Equal(after.Started) {
		from = len(before.History)
	}
	for _, e := range after.History[min(from, len(after.History)):] {
		c.log.Info("swap", "plan", after.PlanID, "out", after.Out.Node, "in", after.In.Node, "step", e.Step, "state", e.State, "cause", e.Cause, "term", e.Term)
	}
}

// withActing draws the plan on st and, acting guided or auto, runs the
// executor.
func (c *Controller) withActing(ctx context.Context, st *status.Status, nodes []corev1.Node, now time.Time) {
	s := c.cfg.Settings
	if !s.Acts() {
		kube.WithActing(st, nodes, s, now, nil)
		return
	}
	r := c.readActing(ctx, st, now)
	w := kube.WithActing(st, nodes, s, now, &r.read)
	c.act(ctx, st, w, r, nodes)
}
