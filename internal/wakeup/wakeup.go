// Package wakeup reads how late this process wakes from a timer: a host
// starved of CPU (a busy desktop, a CFS quota used up, a throttled virtual
// machine) runs its processes late, and etcd's leader sends its heartbeats
// from a ticker that fires once a heartbeat interval (etcd v3.6.15,
// server/etcdserver/raft.go, newRaftNode: time.NewTicker(heartbeat)). A
// ticker that fires a heartbeat interval late makes a gap of two intervals
// between heartbeats, which etcd itself counts as late
// (etcd_server_heartbeat_send_failures_total, "leader failed to send out
// heartbeat on time"; docs/limits.md, "wakeup_late").
//
// A Meter keeps a timer due once an interval, on a fixed schedule as
// etcd's ticker is, and keeps the largest lateness (the wake minus when it
// was due, on the monotonic clock) seen since it was last read. None of
// etcd's own metrics sees starvation as starvation (lab/cmd/votercpu): its late
// heartbeats come from a starved leader only, and its disk and round-trip
// histograms move little and name the disk or the path. A timer in the
// starved process itself does.
//
// The core (tracker) is pure: it is told when a timer was due and when it
// woke. The loop around it takes its clock and its sleep as functions, so
// that tests drive it without waiting.
package wakeup

import (
	"context"
	"sync"
	"time"
)

// Reading is what a Meter saw since it was last read.
type Reading struct {
	// Late is the largest lateness of a wake-up: how long after its due
	// time the timer's goroutine ran.
	Late time.Duration
	// Wakes is the wake-ups seen.
	Wakes int
}

// tracker keeps the largest lateness since it was last taken. It is the
// pure core: it is told when each timer is due and when it woke.
type tracker struct {
	mu sync.Mutex
	// due is when the timer armed last is due; zero when none is armed.
	due time.Time
	// late and wakes are since the last take.
	late  time.Duration
	wakes int
	// total counts every wake-up since the start, never reset (the
	// benchmark reads it).
	total uint64
}

// armed records that a timer is set to fire at due.
func (t *tracker) armed(due time.Time) {
	t.mu.Lock()
	t.due = due
	t.mu.Unlock()
}

// disarmed records that no timer is armed: the loop has stopped.
func (t *tracker) disarmed() {
	t.mu.Lock()
	t.due = time.Time{}
	t.mu.Unlock()
}

// woke records that the armed timer's goroutine ran at now.
func (t *tracker) woke(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.due.IsZero() {
		return
	}
	// A timer never fires before it is due on the monotonic clock; an
	// injected clock could say otherwise, and early is not late.
	t.late = max(t.late, now.Sub(t.due))
	t.wakes++
	t.total++
	t.due = time.Time{}
}

// take returns the wake-ups seen since the last take, and starts again; ok
// is false when there were none (the first read after a start, or reads
// closer together than the interval). A timer still pending past its due
// time is not counted until it wakes: each wake-up is counted once, at the
// first take after it, so that one stall (a process stopped for seconds,
// a paused virtual machine) is one late sample, which the tail forgives as
// it forgives any single outlier, and not two.
func (t *tracker) take() (r Reading, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r = Reading{Late: t.late, Wakes: t.wakes}
	t.late, t.wakes = 0, 0
	return r, r.Wakes > 0
}

// Meter times a timer due once an interval, from Start until Stop, and
// keeps the largest lateness since Take was last called. Its methods are
// safe for concurrent use.
type Meter struct {
	interval time.Duration
	// now and sleep are the clock: the monotonic clock and a timer of the
	// loop's own unless a test injects them. sleep returns false when ctx
	// ended first.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	// origin, when set, is the schedule's phase: the timer is due at
	// origin plus whole intervals. Zero: one interval after the start
	// (NewFrom).
	origin time.Time
	t      tracker

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Meter whose timer is due once an interval; it does
// nothing until Start.
func New(interval time.Duration) *Meter {
	return &Meter{interval: interval, now: wall.Now}
}

// NewFrom is New with the schedule's phase placed: the timer is due at
// origin plus whole intervals rather than one interval after Start. For a
// caller that reads lateness against something with a phase of its own: a
// CFS quota throttles a process for the rest of each period once its slice
// is spent, so a timer due at the same point of every period reads the same
// lateness each time, and where that point falls decides what is read
// (test/integration/wakeup places it half a heartbeat into a period). A
// zero origin is New's schedule.
func NewFrom(interval time.Duration, origin time.Time) *Meter {
	m := New(interval)
	m.origin = origin
	return m
}

// Interval is the schedule's interval.
func (m *Meter) Interval() time.Duration { return m.interval }

// Start runs the loop in a goroutine of its own until ctx ends or Stop is
// called. A Meter already running, or with no interval, is left as it is.
func (m *Meter) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done != nil || m.interval <= 0 {
		return
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		m.run(ctx)
	}(m.done)
}

// Stop ends the loop and waits for it to return; a Meter not running is
// left as it is. Take still reads what was seen before.
func (m *Meter) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel, m.done = nil, nil
	m.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// Take returns the largest lateness of the wake-ups since the last Take
// (Reading), and starts again; ok is false when none came since then.
func (m *Meter) Take() (Reading, bool) { return m.t.take() }

// run arms the timer, waits for it and records the wake-up, until ctx
// ends. The timer is due on a fixed schedule, once an interval, as etcd's
// raft ticker (time.NewTicker) fires, and not an interval after each
// wake-up, as a sleep would be: under a CFS quota a process runs in a slice
// at the start of each CFS period, and a timer armed afresh at each
// wake-up there would fall due at the same point of every period and read
// the period less the interval, while a ticker's tick due anywhere in the
// throttled rest waits up to the period. After a late wake-up the next due
// time is the schedule's first after it: a ticker drops the ticks it could
// not deliver.
func (m *Meter) run(ctx context.Context) {
	sleep := m.sleep
	if sleep == nil {
		// One timer, reset each time: the loop allocates nothing as it
		// runs. (Since Go 1.23 a Reset timer never delivers a stale fire.)
		timer := wall.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		sleep = func(ctx context.Context, d time.Duration) bool {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return false
			case <-timer.C():
				return true
			}
		}
	}
	defer m.t.disarmed()
	now := m.now()
	next := now.Add(m.interval)
	if !m.origin.IsZero() {
		next = after(m.origin, now, m.interval)
	}
	for {
		m.t.armed(next)
		if !sleep(ctx, next.Sub(now)) {
			return
		}
		now = m.now()
		m.t.woke(now)
		// A clock that says the timer woke early (only an injected one
		// can) still moves the schedule on by one.
		next = after(next, latest(now, next), m.interval)
	}
}

// after is the first time of the schedule due + whole intervals (of either
// sign) that is later than now.
func after(due, now time.Time, interval time.Duration) time.Time {
	if d := due.Sub(now); d > 0 {
		return due.Add(-((d - 1) / interval) * interval)
	}
	return due.Add((now.Sub(due)/interval + 1) * interval)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
