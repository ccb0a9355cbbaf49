package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/version"
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
	// Page, when set, names this replica's page in the Endpoints of the
	// Service that reaches the leader's (advertise.go).
	Page *PageAdvert
	// RecordFormat is the record layout the Lease says its holder reads
	// (record.FormatAnnotation), which the probes write: 0 is this
	// release's, record.FormatRead; -1 says none, as a release before the
	// tail layout writes the Lease (the rollout test stands one in so).
	RecordFormat int
}

// recordFormat is what this replica's writes of the Lease say it reads.
func (e Election) recordFormat() int {
	switch {
	case e.RecordFormat < 0:
		return 0
	case e.RecordFormat == 0:
		return record.FormatRead
	}
	return e.RecordFormat
}

// TakeoverBound is the longest a follower takes to lead once the leader has
// stopped without giving the Lease up: it sees the last renewal within two
// jittered retry periods of it, waits a lease duration from then, and tries
// again within two more.
func (e Election) TakeoverBound() time.Duration {
	return e.LeaseDuration + time.Duration(2*(1+jitterFactor)*float64(e.RetryPeriod))
}

// HonouredDuration is the longest lease duration a follower waits out,
// whatever a Lease says: its own, rounded up to the whole seconds a Lease
// holds (kube.LeaseRecord). Every replica runs with the same flags, so an
// honest holder never writes more; a Lease that says more (a hostile or
// mistaken writer, say a year) would otherwise keep the honest replicas
// following for as long as it says. A shorter duration is honoured as
// written: a holder that gives the Lease up writes the least a Lease
// counts, so that the follower takes it at its next retry.
func (e Election) HonouredDuration() time.Duration {
	return (e.LeaseDuration + time.Second - 1) / time.Second * time.Second
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
	e      Election
	clock  clock.Clock
	log    *slog.Logger
	status string // the status ConfigMap, read for the last term when the Lease is gone

	mu sync.Mutex
	// observed is the Lease's record as last read or written, its
	// resourceVersion, and when this process first saw it so (monotonic,
	// taken after the read returned: a read that took long may return a
	// renewal made while it was under way, and a stamp from before it
	// would count that renewal's lease duration from before it was made).
	observed   kube.LeaseRecord
	observedRV string
	observedAt time.Time
	// goneAt is when this process first found gone a Lease it had last
	// read held by another, or free (goneSince); zero while it reads one,
	// and when it has found none gone.
	goneAt time.Time
	// renewedAt is when this process last acquired or renewed the Lease
	// (monotonic, taken before the request, so that the leader's own
	// deadline never ends after the one the follower counts), zero when it
	// does not lead.
	renewedAt time.Time
	// lastRead is when the Lease was last read or written at all: a
	// follower that reads it is a ready follower.
	lastRead time.Time
	// lastErr is why the last attempt failed, nil when it did not.
	lastErr error
	// floor is the highest term this process has seen, in the Lease or in
	// the status a leader wrote: a term it starts is above it, so terms
	// never go back, even across a Lease deleted and made anew.
	floor int32
	// terms are this process's spells of leading, for a check that holds
	// two replicas' spells apart (LeadingSpells).
	terms []spell
	// holderClock is how far another holder's clock reads ahead of this
	// one's, as its renewals tell it (clockOf).
	holderClock struct {
		holder string
		ahead  time.Duration
	}
}

// maxSpells bounds the spells kept: a process that runs for months keeps
// the latest, enough for any test, not one per term it ever held.
const maxSpells = 64

// spell is one spell of leading, by this process's monotonic clock: from
// when its acquiring write returned to the end of its last renew deadline,
// or to when it stepped down if that was earlier.
type spell struct{ from, to time.Time }

// attempt is how one try for the Lease ended.
type attempt int

const (
	// attemptLeads: this controller acquired or renewed the Lease.
	attemptLeads attempt = iota
	// attemptHeld: another holds it, and its lease duration, as this
	// process counts it, has not run out.
	attemptHeld
	// attemptGone: the Lease this controller leads by is gone (deleted, or
	// emptied by another writer): its term ends, and it runs for a new one.
	attemptGone
	// attemptFailed: a read or write failed (the error says which).
	attemptFailed
)

// try is client-go's tryAcquireOrRenew: take the Lease when it is free or
// its holder's last renewal, as this process saw it, is a lease duration
// old (at most HonouredDuration); renew it when this controller holds it.
func (el *elector) try(ctx context.Context) (attempt, error) {
	e := el.e
	before := el.clock.Now()
	rec := kube.LeaseRecord{Holder: e.Identity, LeaseDuration: e.LeaseDuration, AcquireTime: before, RenewTime: before,
		RecordFormat: e.recordFormat()}
	old, rv, err := e.Leases.Get(ctx, e.Name)
	if errors.Is(err, kube.ErrNotFound) && el.leadingNow() {
		return attemptGone, nil
	}
	if errors.Is(err, kube.ErrNotFound) && el.goneSince() {
		// Deleted after this process read it held by another, or free:
		// that holder, or one that took it or renewed it since, unseen,
		// writes on until its next renewal finds the Lease gone, so a
		// lease duration is waited out as if the Lease were still there.
		return attemptHeld, nil
	}
	if errors.Is(err, kube.ErrNotFound) {
		// No Lease (never made, or deleted): the term starts above every
		// term this process or the status has seen.
		rec.Transitions = el.floorFrom(ctx) + 1
		rv, err = e.Leases.Create(ctx, e.Name, rec)
		if err != nil {
			return el.failed(fmt.Errorf("no lease %s/%s; creating it: %w", e.Namespace, e.Name, err))
		}
		el.lead(rec, rv, before)
		return attemptLeads, nil
	}
	if err != nil {
		return el.failed(err)
	}
	after := el.clock.Now()
	el.mu.Lock()
	el.goneAt = time.Time{}
	if !sameRecord(old, el.observed) || rv != el.observedRV {
		el.observed, el.observedRV, el.observedAt = old, rv, after
		el.learnClock(old, after)
	}
	el.lastRead, el.lastErr = after, nil
	el.floor = max(el.floor, old.Transitions)
	expired := !el.observedAt.Add(min(el.observed.LeaseDuration, e.HonouredDuration())).After(after)
	floor := el.floor
	el.mu.Unlock()
	if old.Holder != e.Identity && el.leadingNow() {
		// Written by another while this controller leads (taken over, or
		// given up for it): its term is over, whoever holds the Lease now.
		if old.Holder != "" {
			return attemptHeld, nil
		}
		return attemptGone, nil
	}
	if old.Holder != "" && old.Holder != e.Identity && !expired {
		return attemptHeld, nil
	}
	if old.Holder == e.Identity {
		rec.AcquireTime, rec.Transitions = old.AcquireTime, old.Transitions
	} else {
		rec.Transitions = max(old.Transitions, floor) + 1
	}
	rv, err = e.Leases.Update(ctx, e.Name, rec, rv)
	if err != nil {
		return el.failed(err)
	}
	el.lead(rec, rv, before)
	return attemptLeads, nil
}

// learnClock takes what a renewal by another holder, first seen at
// seenAt, says of its clock: the renewal's time (its clock) less seenAt
// (this one's). The renewal was made before it was seen, so each reading
// is at most how far the holder's clock is ahead, short of it by the time
// between the renewal and this read (up to a retry period and a read's
// latency); the largest reading of the same holder is the closest. el.mu
// is held.
func (el *elector) learnClock(r kube.LeaseRecord, seenAt time.Time) {
	if r.Holder == "" || r.Holder == el.e.Identity || r.RenewTime.IsZero() {
		return
	}
	ahead := r.RenewTime.Sub(seenAt.Round(0))
	if hc := &el.holderClock; hc.holder != r.Holder || ahead > hc.ahead {
		hc.holder, hc.ahead = r.Holder, ahead
	}
}

// clockOf is how far holder's clock reads ahead of this one's (negative:
// behind), at most, and whether this process has seen holder renew.
func (el *elector) clockOf(holder string) (time.Duration, bool) {
	el.mu.Lock()
	defer el.mu.Unlock()
	if holder == "" || el.holderClock.holder != holder {
		return 0, false
	}
	return el.holderClock.ahead, true
}

// floorFrom raises the floor to the term of the status's writer, when the
// status says one; a status that cannot be read leaves it as it is (the
// Lease's own terms, as this process saw them, still hold).
func (el *elector) floorFrom(ctx context.Context) int32 {
	el.mu.Lock()
	floor := el.floor
	el.mu.Unlock()
	if data, _, err := el.e.Status.Read(ctx, el.status); err == nil && data[status.StatusKey] != "" {
		if st, err := status.UnmarshalStatus([]byte(data[status.StatusKey])); err == nil && st.Writer != nil {
			floor = max(floor, st.Writer.Term)
		}
	}
	el.mu.Lock()
	el.floor = max(el.floor, floor)
	floor = el.floor
	el.mu.Unlock()
	return floor
}

func (el *elector) failed(err error) (attempt, error) {
	el.mu.Lock()
	el.lastErr = err
	el.mu.Unlock()
	return attemptFailed, err
}

// sameRecord compares two records, their times as instants.
func sameRecord(a, b kube.LeaseRecord) bool {
	return a.Holder == b.Holder && a.LeaseDuration == b.LeaseDuration && a.Transitions == b.Transitions &&
		a.AcquireTime.Equal(b.AcquireTime) && a.RenewTime.Equal(b.RenewTime)
}

// lead records an acquisition or renewal conditioned on the stamp before.
func (el *elector) lead(rec kube.LeaseRecord, rv string, before time.Time) {
	el.mu.Lock()
	defer el.mu.Unlock()
	after := el.clock.Now()
	el.observed, el.observedRV, el.observedAt, el.lastRead, el.lastErr = rec, rv, after, after, nil
	el.goneAt = time.Time{}
	el.floor = max(el.floor, rec.Transitions)
	if el.renewedAt.IsZero() {
		if len(el.terms) == maxSpells {
			el.terms = append(el.terms[:0], el.terms[1:]...)
		}
		// A spell starts when the write that took the Lease returned: no
		// status is written before.
		el.terms = append(el.terms, spell{from: after})
	}
	el.renewedAt = before
	el.terms[len(el.terms)-1].to = before.Add(el.e.RenewDeadline)
}

// stepDown ends this process's leading now, whatever its deadline says.
func (el *elector) stepDown() {
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.renewedAt.IsZero() {
		return
	}
	now := el.clock.Now()
	if last := &el.terms[len(el.terms)-1]; now.Before(last.to) {
		last.to = now
	}
	el.renewedAt = time.Time{}
}

// forget clears the record as observed, after a lost term: the next read
// stamps whatever it finds afresh.
func (el *elector) forget() {
	el.stepDown()
	el.mu.Lock()
	defer el.mu.Unlock()
	el.observed, el.observedRV, el.observedAt = kube.LeaseRecord{}, "", el.clock.Now()
	el.goneAt = time.Time{}
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

// goneSince is whether the Lease, which this process last read as another's
// or free, was found gone less than a lease duration ago by this
// process's first read that found it so. Between that last read and the
// deletion another replica may have taken the Lease or renewed it unseen
// (TestElectionOnAPIServer once saw it: a follower whose last read was a
// foreign holder's expired Lease made the deleted Lease anew while the
// replica that had taken it over led on, 50 ms of two leaders). That
// replica writes on until its next renewal finds the Lease gone, at most
// its renew deadline after its last renewal, which was before the
// deletion and so before the read that found it gone: a lease duration
// from that read is longer. A process that has never read a Lease, or
// whose own it was (its term ended, and forget cleared the record), makes
// it anew at once.
func (el *elector) goneSince() bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	now := el.clock.Now()
	if el.goneAt.IsZero() {
		if el.observedRV == "" || el.observed.Holder == el.e.Identity {
			return false
		}
		el.goneAt = now
	}
	return el.goneAt.Add(el.e.HonouredDuration()).After(now)
}

// leadingNow is whether this process holds a term, its deadline aside.
func (el *elector) leadingNow() bool {
	el.mu.Lock()
	defer el.mu.Unlock()
	return !el.renewedAt.IsZero()
}

func (el *elector) leading() bool {
	u := el.validUntil()
	return !u.IsZero() && el.clock.Now().Before(u)
}

// wait waits d; false when ctx ended first.
func (el *elector) wait(ctx context.Context, d time.Duration) bool {
	t := el.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// jittered waits a retry period, spread as client-go spreads it.
func (el *elector) jittered(ctx context.Context) bool {
	return el.wait(ctx, el.e.RetryPeriod+time.Duration(rand.Float64()*jitterFactor*float64(el.e.RetryPeriod)))
}

// acquire tries every retry period until it holds the Lease; false when
// ctx ended first. Every failed try is logged with its cause, and a new
// holder once, so that a Lease this controller may not read or write (RBAC,
// a wrong namespace) says so in its log rather than leaving it following
// in silence.
func (el *elector) acquire(ctx context.Context) bool {
	lease := el.e.Namespace + "/" + el.e.Name
	holder := ""
	for {
		switch a, err := el.try(ctx); a {
		case attemptLeads:
			return true
		case attemptHeld:
			el.mu.Lock()
			h, d := el.observed.Holder, el.observed.LeaseDuration
			el.mu.Unlock()
			if h != holder {
				holder = h
				el.log.Info("following: another controller holds the lease", "lease", lease, "holder", h,
					"lease_duration", d, "honoured_at_most", el.e.HonouredDuration())
			}
		case attemptFailed:
			if ctx.Err() == nil {
				el.log.Warn("try for the lease failed; trying again after a retry period", "lease", lease, "err", err)
			}
		}
		if !el.jittered(ctx) {
			return false
		}
	}
}

// renew renews every retry period until a renew deadline passes without a
// renewal, another holder is seen, or ctx ends; then it cancels the term.
func (el *elector) renew(ctx context.Context, lost context.CancelFunc) {
	defer lost()
	lease := el.e.Namespace + "/" + el.e.Name
	for {
		if !el.wait(ctx, el.e.RetryPeriod) {
			return
		}
		reread := false
		for {
			until := el.validUntil()
			if !el.clock.Now().Before(until) {
				return
			}
			rctx, cancel := context.WithTimeout(ctx, until.Sub(el.clock.Now()))
			a, err := el.try(rctx)
			cancel()
			if a == attemptLeads || ctx.Err() != nil {
				break
			}
			if a == attemptGone {
				el.log.Warn("the lease is gone (deleted or emptied by another); stepping down and running for a new term", "lease", lease)
				el.stepDown()
				return
			}
			if a == attemptHeld {
				// Another took the Lease over (by its clock this lease ran
				// out): writing on until this one's own deadline would make
				// two writers.
				el.mu.Lock()
				h := el.observed.Holder
				el.mu.Unlock()
				el.log.Warn("another controller holds the lease; stepping down at once", "lease", lease, "holder", h)
				el.stepDown()
				return
			}
			el.log.Warn("renew the lease failed; trying again", "lease", lease, "err", err, "leading_until", until)
			if errors.Is(err, kube.ErrConflict) && !reread {
				// Written by another since this one read it: read it again
				// at once (once) and see who holds it.
				reread = true
				continue
			}
			if !el.jittered(ctx) {
				return
			}
		}
	}
}

// release gives the Lease up, as client-go does on a stop: the holder
// emptied and the duration the least a Lease counts, so that the follower
// takes it at its next retry.
func (el *elector) release(ctx context.Context) error {
	el.mu.Lock()
	held := !el.renewedAt.IsZero()
	el.mu.Unlock()
	if !held {
		return nil
	}
	el.stepDown()
	// Read afresh rather than update the record this process last saw: a
	// renewal cut off by the stop may have landed with its answer lost,
	// and an update on the resourceVersion before it would be refused,
	// leaving the follower to wait out a whole lease duration.
	for {
		rec, rv, err := el.e.Leases.Get(ctx, el.e.Name)
		if errors.Is(err, kube.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Holder != el.e.Identity {
			return nil // taken over, or given up already
		}
		rec.Holder, rec.LeaseDuration, rec.RenewTime = "", time.Second, el.clock.Now()
		_, err = el.e.Leases.Update(ctx, el.e.Name, rec, rv)
		if !errors.Is(err, kube.ErrConflict) || ctx.Err() != nil {
			return err
		}
		// Written between the read and the update: read it again.
	}
}

// term is one spell of leading: the writer it names and the status's
// resourceVersion as it last read or wrote it.
type term struct {
	el     *elector
	writer *status.Writer
	rv     string
	status string
}

var errNotLeading = errors.New("not writing: this controller no longer holds the lease")

// publish writes the status, only while the term lasts and on the
// condition that the status is as this leader last saw it.
func (t *term) publish(ctx context.Context, text string) error {
	until := t.el.validUntil()
	if until.IsZero() || !t.el.clock.Now().Before(until) {
		return errNotLeading
	}
	wctx, cancel := context.WithTimeout(ctx, until.Sub(t.el.clock.Now()))
	defer cancel()
	rv, err := t.el.e.Status.PatchKeyAt(wctx, t.status, status.StatusKey, text, t.rv)
	if errors.Is(err, kube.ErrConflict) {
		// Another wrote it since (a leader deposed while its write was in
		// flight, or a person): read where it is now, and write over it
		// at the next decision, while this term lasts.
		if _, now, rerr := t.el.e.Status.Read(ctx, t.status); rerr == nil {
			t.rv = now
		}
		return fmt.Errorf("the status was written by another since this controller last wrote it: %w", err)
	}
	if errors.Is(err, kube.ErrNotFound) {
		// Deleted (by a person, or an uninstall left half done): made anew
		// with this decision, while the term lasts, rather than a leader
		// that holds the Lease and writes nothing until the install is
		// applied again.
		rv, cerr := t.el.e.Status.Create(wctx, t.status, status.StatusKey, text)
		if cerr != nil {
			return fmt.Errorf("the status is gone (%w) and making it anew failed: %w", err, cerr)
		}
		t.el.log.Warn("the status ConfigMap was deleted; made it anew with this decision", "configmap", t.el.e.Namespace+"/"+t.status)
		t.rv = rv
		return nil
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
	el := &elector{e: e, clock: c.cfg.Clock, log: c.log, status: c.cfg.Settings.StatusConfigMap}
	c.cfg.Metrics.leading(false)
	c.mu.Lock()
	c.elector = el
	c.mu.Unlock()
	c.cfg.Page.SetStanding(c.Standing)
	lease := e.Namespace + "/" + e.Name
	c.log.Info("running for the lease", "lease", lease, "identity", e.Identity,
		"lease_duration", e.LeaseDuration, "renew_deadline", e.RenewDeadline, "retry_period", e.RetryPeriod)
	for {
		if !el.acquire(ctx) {
			return nil
		}
		el.mu.Lock()
		w := &status.Writer{Identity: e.Identity, Lease: lease, Term: el.observed.Transitions, Since: el.observed.AcquireTime.UTC(), Version: version.Get().Version}
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
		// The term's decisions are over (Run has returned): nothing of the
		// last one is exported or served as if it were still current.
		c.cfg.Metrics.forgetDecision()
		c.cfg.Page.Forget()
		if ctx.Err() != nil {
			if e.ReleaseOnCancel {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.RenewDeadline)
				// The page first, while the Lease still keeps the next
				// leader from naming its own.
				c.withdraw(rctx, e.Page)
				if err := el.release(rctx); err != nil {
					c.log.Warn("give up the lease failed; the follower takes it over after a lease duration", "err", err)
				} else {
					c.log.Info("gave up the lease", "lease", lease)
				}
				cancel()
			}
			return nil
		}
		el.forget()
		c.log.Warn("lost the lease; this controller writes nothing, and stands aside for a lease duration before it runs again", "lease", lease, "renew_deadline", e.RenewDeadline, "lease_duration", e.LeaseDuration)
		// A controller that could not renew within its renew deadline is
		// likely on a slow path or host (on real k3s: the very voter a
		// swap was to take out, slowed 300 ms each way). Running again at
		// once, it took the Lease back as its holder of record at each late
		// renewal, and the follower on a sound host never got it: the
		// Lease flapped and no decision was published for minutes. Standing
		// aside for a lease duration lets the record expire, and the
		// follower take it.
		if !el.wait(ctx, e.LeaseDuration) {
			return nil
		}
	}
}

// lead is one term: it reads the status as the other leader left it (the
// decision's memory, and the resourceVersion its writes are conditioned
// on), and decides until ctx ends, writing through t.
func (c *Controller) lead(ctx context.Context, t *term) {
	for {
		data, rv, err := t.el.e.Status.Read(ctx, t.status)
		if err == nil || errors.Is(err, kube.ErrNotFound) {
			// A status that is gone holds no memory: the term starts as on
			// a new install, and its first write makes the status anew.
			t.rv = rv
			c.previous, c.loaded = nil, true
			w := c.takePrevious(data)
			c.previousAt = previousAt(w, c.previous, t.writer.Identity, t.el.clockOf, c.cfg.Clock.Now(), t.el.e.LeaseDuration)
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
	defer c.advertise(ctx, t)()
	_ = c.Run(ctx)
}

// previousAt is when, by this process's clock, the previous status was
// generated, for the decision's Input.PreviousAt: zero when it is on this
// clock already (this process wrote it, or a controller that runs for no
// Lease, as the previous life of this one), or when the writer's clock is
// within tolerance of this one; else its generation moved by how far the
// writer's clock read ahead, as its renewals told (clockOf), and never
// later than readAt, when this process read it. A writer this process
// never saw renew has a clock it cannot know: the status then counts as
// generated when it was read, which shortens every age by the time
// between, and so lengthens the cooldown and the holds, never shortens
// them.
//
// The tolerance is the lease duration: a reading of the writer's clock is
// short by up to a retry period and a read's latency, and a skew under a
// lease duration moves a cooldown of 30 minutes by under 1%.
func previousAt(w *status.Writer, prev *status.Status, self string, clockOf func(string) (time.Duration, bool), readAt time.Time, tolerance time.Duration) time.Time {
	if prev == nil || w == nil || w.Identity == self || prev.GeneratedAt.IsZero() {
		return time.Time{}
	}
	ahead, ok := clockOf(w.Identity)
	if !ok {
		return readAt
	}
	if ahead.Abs() < tolerance {
		return time.Time{}
	}
	at := prev.GeneratedAt.Add(-ahead)
	if at.After(readAt) {
		at = readAt
	}
	return at
}

// readyElected is the readiness of a controller that runs for the Lease:
// a follower is ready while it reads the Lease (it can take it over), that
// is, it read it within a renew deadline, the time a leader keeps leading
// without a renewal, and its note says why it does not lead (who does);
// one whose tries fail is not ready, and says why. A leader is as Ready
// says of its decisions. handled is false when the controller does not run
// for it.
func (c *Controller) readyElected() (handled bool, note string, err error) {
	c.mu.Lock()
	el := c.elector
	c.mu.Unlock()
	if el == nil || el.leading() {
		return false, "", nil
	}
	el.mu.Lock()
	last, lastErr, holder, since := el.lastRead, el.lastErr, el.observed.Holder, el.observedAt
	el.mu.Unlock()
	lease := el.e.Namespace + "/" + el.e.Name
	if last.IsZero() {
		if lastErr != nil {
			return true, "", fmt.Errorf("not leading: the lease %s has not been read: %w", lease, lastErr)
		}
		return true, "", fmt.Errorf("not leading: the lease %s has not been read yet", lease)
	}
	if age := el.clock.Since(last); age > el.e.RenewDeadline {
		if lastErr != nil {
			return true, "", fmt.Errorf("not leading: the lease %s was last read %s ago, over the renew deadline %s; the last try failed: %w", lease, age.Round(time.Millisecond), el.e.RenewDeadline, lastErr)
		}
		return true, "", fmt.Errorf("not leading: the lease %s was last read %s ago, over the renew deadline %s", lease, age.Round(time.Millisecond), el.e.RenewDeadline)
	}
	if holder == "" {
		return true, fmt.Sprintf("following: the lease %s is free; this controller takes it at its next try", lease), nil
	}
	return true, fmt.Sprintf("following: %s holds the lease %s (as it stands, seen %s ago)", holder, lease, el.clock.Since(since).Round(time.Millisecond)), nil
}

// Standing is whether this controller leads and, when it does not, who
// does or why it cannot tell (readyElected's note or error): the status page
// asks it at every request. A controller that does not run for the Lease
// always leads.
func (c *Controller) Standing() (leading bool, note string) {
	handled, note, err := c.readyElected()
	switch {
	case !handled:
		return true, ""
	case err != nil:
		return false, err.Error()
	}
	return false, note
}

// leadingSpells are the spells this process has led, for tests.
func (el *elector) leadingSpells() []spell {
	el.mu.Lock()
	defer el.mu.Unlock()
	return append([]spell(nil), el.terms...)
}

// LeadingSpells are the spells this controller has led through RunElected
// (the latest maxSpells), each [from, to] by its own monotonic clock; nil
// when it never ran for the Lease. Exported for the check, against a real
// API server, that two replicas' spells never overlap: the one guarantee of
// the election that no status or metric shows directly, since a replica
// that believed it led a moment too long writes nothing to show it
// (test/integration/controller).
func (c *Controller) LeadingSpells() [][2]time.Time {
	c.mu.Lock()
	el := c.elector
	c.mu.Unlock()
	if el == nil {
		return nil
	}
	var out [][2]time.Time
	for _, s := range el.leadingSpells() {
		out = append(out, [2]time.Time{s.from, s.to})
	}
	return out
}
