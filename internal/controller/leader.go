package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
)

// One writer of the status (docs/status.md, "One writer"). The controller
// runs as two replicas, so that a node's loss does not leave the fleet
// without a decision for the minutes a Pod takes to be replaced; one holds
// a coordination.k8s.io Lease and decides and writes, the other waits to
// take the Lease over. The election follows client-go's leaderelection
// (its tryAcquireOrRenew: a record of the holder, renewed every retry
// period, taken over once no renewal has been seen for a lease duration by
// the taker's own clock; each write conditioned on the Lease's
// resourceVersion), written here on the Lease client of internal/kube
// (kube/lease.go says why not client-go's package itself). The leader stops
// writing the moment its renewals have failed for a renew deadline, which
// is shorter than the lease duration another waits; and every status write
// carries the resourceVersion of the status as this leader last read or
// wrote it, so that a write that lands late, after another leader has
// written, fails.

// LeaseName is the Lease the replicas run for, in fleet-role's namespace.
const LeaseName = "fleet-role"

// The lease's timing: kube-controller-manager's and kube-scheduler's own
// defaults (--leader-elect-lease-duration, -renew-deadline, -retry-period),
// under which a lost leader is replaced within LeaseDuration +
// 2 x (1 + jitterFactor) x RetryPeriod (TakeoverBound).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// jitterFactor spreads the retries as client-go's JitterUntil does
	// (its leaderelection's JitterFactor).
	jitterFactor = 1.2
)

// Election is what the controller needs to run for the Lease.
type Election struct {
	// Leases holds the Lease Name; Status reads and writes the status
	// ConfigMap with preconditions.
	Leases kube.Leases
	Status kube.StatusStore
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity is this controller's: unique among the replicas, and
	// changed by a restart (a process that restarted does not hold its
	// previous life's Lease).
	Identity string
	// LeaseDuration is how long a follower waits, by its own clock, from
	// the last renewal it saw before it takes the Lease over;
	// RenewDeadline how long the leader keeps leading while its renewals
	// fail; RetryPeriod how often each tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ReleaseOnCancel gives the Lease up on a stop, so that the follower
	// takes it at its next retry rather than after a lease duration.
	ReleaseOnCancel bool
}

// TakeoverBound is the longest a follower takes to lead once the leader has
// stopped without giving the Lease up: it sees the last renewal within two
// jittered retry periods of it, waits a lease duration from then, and tries
// again within two more.
func (e Election) TakeoverBound() time.Duration {
	return e.LeaseDuration + time.Duration(2*(1+jitterFactor)*float64(e.RetryPeriod))
}

func (e Election) validate() error {
	switch {
	case e.Leases == nil || e.Status == nil:
		return errors.New("leader election needs a Lease client and a status store")
	case e.Name == "" || e.Identity == "":
		return errors.New("leader election needs the Lease's name and this controller's identity")
	case e.RetryPeriod <= 0:
		return fmt.Errorf("leader election: retry period %v, want more than 0", e.RetryPeriod)
	case e.RenewDeadline <= time.Duration(jitterFactor*float64(e.RetryPeriod)):
		return fmt.Errorf("leader election: renew deadline %v must exceed %v x the retry period %v", e.RenewDeadline, jitterFactor, e.RetryPeriod)
	case e.LeaseDuration <= e.RenewDeadline:
		return fmt.Errorf("leader election: lease duration %v must exceed the renew deadline %v", e.LeaseDuration, e.RenewDeadline)
	}
	return nil
}

// elector is the state of one controller's run for the Lease.
type elector struct {
	e Election

	mu sync.Mutex
	// observed is the Lease's record as last read or written, its
	// resourceVersion, and when this process first saw it so (monotonic).
	observed   kube.LeaseRecord
	observedRV string
	observedAt time.Time
	// renewedAt is when this process last acquired or renewed the Lease
	// (monotonic, taken before the request), zero when it does not lead.
	renewedAt time.Time
	// lastRead is when the Lease was last read or written at all: a
	// follower that reads it is a ready follower.
	lastRead time.Time
}

// tryAcquireOrRenew is client-go's: take the Lease when it is free or its
// holder's last renewal, as this process saw it, is a lease duration old;
// renew it when this controller holds it.
func (el *elector) tryAcquireOrRenew(ctx context.Context) bool {
	e := el.e
	now := time.Now()
	rec := kube.LeaseRecord{Holder: e.Identity, LeaseDuration: e.LeaseDuration, AcquireTime: now, RenewTime: now}
	old, rv, err := e.Leases.Get(ctx, e.Name)
	if errors.Is(err, kube.ErrNotFound) {
		rv, err = e.Leases.Create(ctx, e.Name, rec)
		if err != nil {
			return false
		}
		el.set(rec, rv, now, true)
		return true
	}
	if err != nil {
		return false
	}
	el.mu.Lock()
	if !sameRecord(old, el.observed) || rv != el.observedRV {
		el.observed, el.observedRV, el.observedAt = old, rv, now
	}
	el.lastRead = now
	expired := !el.observedAt.Add(el.observed.LeaseDuration).After(now)
	el.mu.Unlock()
	if old.Holder != "" && old.Holder != e.Identity && !expired {
		return false
	}
	if old.Holder == e.Identity {
		rec.AcquireTime, rec.Transitions = old.AcquireTime, old.Transitions
	} else {
		rec.Transitions = old.Transitions + 1
	}
	rv, err = e.Leases.Update(ctx, e.Name, rec, rv)
	if err != nil {
		return false
	}
	el.set(rec, rv, now, true)
	return true
}

// sameRecord compares two records, their times as instants.
func sameRecord(a, b kube.LeaseRecord) bool {
	return a.Holder == b.Holder && a.LeaseDuration == b.LeaseDuration && a.Transitions == b.Transitions &&
		a.AcquireTime.Equal(b.AcquireTime) && a.RenewTime.Equal(b.RenewTime)
}

func (el *elector) set(rec kube.LeaseRecord, rv string, now time.Time, leading bool) {
	el.mu.Lock()
	defer el.mu.Unlock()
	el.observed, el.observedRV, el.observedAt, el.lastRead = rec, rv, now, now
	if leading {
		el.renewedAt = now
	} else {
		el.renewedAt = time.Time{}
	}
}

// validUntil is when this controller stops leading unless it renews: a
// renew deadline after its last renewal; zero when it does not lead.
func (el *elector) validUntil() time.Time {
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.renewedAt.IsZero() {
		return time.Time{}
	}
	return el.renewedAt.Add(el.e.RenewDeadline)
}

func (el *elector) leading() bool {
	u := el.validUntil()
	return !u.IsZero() && time.Now().Before(u)
}

// jittered waits a retry period, spread as client-go spreads it.
func (el *elector) jittered(ctx context.Context) bool {
	d := el.e.RetryPeriod + time.Duration(rand.Float64()*jitterFactor*float64(el.e.RetryPeriod))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// acquire tries every retry period until it holds the Lease; false when
// ctx ended first.
func (el *elector) acquire(ctx context.Context) bool {
	for {
		if el.tryAcquireOrRenew(ctx) {
			return true
		}
		if !el.jittered(ctx) {
			return false
		}
	}
}

// renew renews every retry period until a renew deadline passes without a
// renewal, or ctx ends; then it cancels the term.
func (el *elector) renew(ctx context.Context, lost context.CancelFunc) {
	defer lost()
	for {
		t := time.NewTimer(el.e.RetryPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			until := el.validUntil()
			if !time.Now().Before(until) {
				return
			}
			rctx, cancel := context.WithDeadline(ctx, until)
			ok := el.tryAcquireOrRenew(rctx)
			cancel()
			if ok || ctx.Err() != nil {
				break
			}
			if !el.jittered(ctx) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// release gives the Lease up, as client-go does on a stop: the holder
// emptied and the duration the least a Lease counts, so that the follower
// takes it at its next retry.
func (el *elector) release(ctx context.Context) error {
	el.mu.Lock()
	rec, rv, held := el.observed, el.observedRV, !el.renewedAt.IsZero()
	el.mu.Unlock()
	if !held || rec.Holder != el.e.Identity {
		return nil
	}
	now := time.Now()
	rec.Holder, rec.LeaseDuration, rec.RenewTime = "", time.Second, now
	rv, err := el.e.Leases.Update(ctx, el.e.Name, rec, rv)
	if err != nil {
		return err
	}
	el.set(rec, rv, now, false)
	return nil
}

// term is one spell of leading: the writer it names and the status's
// resourceVersion as it last read or wrote it.
type term struct {
	el     *elector
	writer *decide.Writer
	rv     string
	status string
}

var errNotLeading = errors.New("not writing: this controller no longer holds the lease")

// publish writes the status, only while the term lasts and on the
// condition that the status is as this leader last saw it.
func (t *term) publish(ctx context.Context, text string) error {
	until := t.el.validUntil()
	if until.IsZero() || !time.Now().Before(until) {
		return errNotLeading
	}
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	rv, err := t.el.e.Status.PatchKeyAt(wctx, t.status, decide.StatusKey, text, t.rv)
	if errors.Is(err, kube.ErrConflict) {
		// Another wrote it since (a leader deposed while its write was in
		// flight, or a person): read where it is now, and write over it
		// at the next decision, while this term lasts.
		if _, now, rerr := t.el.e.Status.Read(ctx, t.status); rerr == nil {
			t.rv = now
		}
		return fmt.Errorf("the status was written by another since this controller last wrote it: %w", err)
	}
	if err != nil {
		return err
	}
	t.rv = rv
	return nil
}

// RunElected runs for the Lease until ctx ends: while it holds it, it
// decides and writes as Run does, each write carrying the status's
// resourceVersion as its precondition; when its renewals fail for a renew
// deadline it stops writing, and runs for the Lease again. On a stop it
// gives the Lease up when ReleaseOnCancel says so.
func (c *Controller) RunElected(ctx context.Context, e Election) error {
	if err := e.validate(); err != nil {
		return err
	}
	el := &elector{e: e}
	c.cfg.Metrics.leading(false)
	c.mu.Lock()
	c.elector = el
	c.mu.Unlock()
	lease := e.Namespace + "/" + e.Name
	c.log.Info("running for the lease", "lease", lease, "identity", e.Identity,
		"lease_duration", e.LeaseDuration, "renew_deadline", e.RenewDeadline, "retry_period", e.RetryPeriod)
	for {
		if !el.acquire(ctx) {
			return nil
		}
		el.mu.Lock()
		w := &decide.Writer{Identity: e.Identity, Lease: lease, Term: el.observed.Transitions, Since: el.observed.AcquireTime.UTC()}
		el.mu.Unlock()
		c.log.Info("leading: this controller decides and writes the status", "lease", lease, "identity", e.Identity, "term", w.Term)
		c.cfg.Metrics.leading(true)
		lctx, lost := context.WithCancel(ctx)
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			el.renew(lctx, lost)
		}()
		c.lead(lctx, &term{el: el, writer: w, status: c.cfg.Settings.StatusConfigMap})
		lost()
		<-renewed
		c.cfg.Metrics.leading(false)
		if ctx.Err() != nil {
			if e.ReleaseOnCancel {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.RenewDeadline)
				if err := el.release(rctx); err != nil {
					c.log.Warn("give up the lease failed; the follower takes it over after a lease duration", "err", err)
				} else {
					c.log.Info("gave up the lease", "lease", lease)
				}
				cancel()
			}
			return nil
		}
		el.set(kube.LeaseRecord{}, "", time.Now(), false)
		c.log.Warn("lost the lease: no renewal within the renew deadline; this controller writes nothing until it leads again", "lease", lease, "renew_deadline", e.RenewDeadline)
	}
}

// lead is one term: it reads the status as the other leader left it (the
// decision's memory, and the resourceVersion its writes are conditioned
// on), and decides until ctx ends, writing through t.
func (c *Controller) lead(ctx context.Context, t *term) {
	for {
		data, rv, err := t.el.e.Status.Read(ctx, t.status)
		if err == nil {
			t.rv = rv
			c.previous, c.loaded = nil, true
			c.takePrevious(data)
			break
		}
		c.log.Warn("read the status at the start of this term failed; trying again", "err", err)
		if !t.el.jittered(ctx) {
			return
		}
	}
	// The first decision of a term is written at once: its writer is new.
	c.lastWritten, c.lastWriteAt, c.lastOutcome = [32]byte{}, time.Time{}, ""
	c.term = t
	defer func() { c.term = nil }()
	_ = c.Run(ctx)
}

// readyElected is the readiness of a controller that runs for the Lease:
// a follower is ready while it reads the Lease (it can take it over), that
// is, it read it within a renew deadline, the time a leader keeps leading
// without a renewal; a leader as Ready says of its decisions. handled is
// false when the controller does not run for it.
func (c *Controller) readyElected() (handled bool, err error) {
	c.mu.Lock()
	el := c.elector
	c.mu.Unlock()
	if el == nil || el.leading() {
		return false, nil
	}
	el.mu.Lock()
	last := el.lastRead
	el.mu.Unlock()
	if last.IsZero() {
		return true, errors.New("following: the lease has not been read yet")
	}
	if age := time.Since(last); age > el.e.RenewDeadline {
		return true, fmt.Errorf("following: the lease was last read %s ago, over the renew deadline %s", age.Round(time.Millisecond), el.e.RenewDeadline)
	}
	return true, nil
}
