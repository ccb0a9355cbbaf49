package wakeup

import (
	"context"
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestTrackerKeepsTheLargestSinceTheLastTake(t *testing.T) {
	var tr tracker
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }

	if r, ok := tr.take(); ok || r != (Reading{}) {
		t.Fatalf("nothing armed: %+v, %v; want no reading", r, ok)
	}
	// Armed, not yet woken: no reading (the first sample after a start).
	tr.armed(at(500))
	if r, ok := tr.take(); ok || r != (Reading{}) {
		t.Fatalf("armed, not woken: %+v, %v; want no reading", r, ok)
	}
	tr.woke(at(507)) // 7 ms late
	tr.armed(at(1007))
	tr.woke(at(1100)) // 93 ms late
	tr.armed(at(1600))
	tr.woke(at(1600)) // on time
	tr.armed(at(2100))
	if r, ok := tr.take(); !ok || r.Late != 93*time.Millisecond || r.Wakes != 3 {
		t.Fatalf("after three wake-ups: %+v, %v; want 93ms of 3", r, ok)
	}
	// Taking starts again.
	tr.woke(at(2101))
	tr.armed(at(2601))
	if r, ok := tr.take(); !ok || r.Late != time.Millisecond || r.Wakes != 1 {
		t.Fatalf("after the take: %+v, %v; want 1ms of 1", r, ok)
	}
	// A wake-up on time is a reading of zero, not none.
	tr.woke(at(2601))
	if r, ok := tr.take(); !ok || r.Late != 0 || r.Wakes != 1 {
		t.Fatalf("on time: %+v, %v; want 0 of 1", r, ok)
	}
	// A clock that says the timer woke early is not late.
	tr.armed(at(3000))
	tr.woke(at(2990))
	if r, ok := tr.take(); !ok || r.Late != 0 {
		t.Fatalf("early: %+v, %v; want 0", r, ok)
	}
	// A wake-up with nothing armed is not counted.
	tr.woke(at(4000))
	if r, ok := tr.take(); ok {
		t.Fatalf("a wake-up with no timer armed: %+v", r)
	}
}

// A stall (the process stopped for seconds) is one late wake-up, counted
// once: not while the timer is pending past its due time, and in full at
// the first take after it wakes. One stall is then one late sample, which
// the tail forgives, not two.
func TestTrackerCountsAStallOnce(t *testing.T) {
	var tr tracker
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	tr.armed(at(500))
	tr.woke(at(510))
	tr.armed(at(1010))
	// Stopped from 1000 ms to 4000 ms; a sample at 4001 ms comes before
	// the timer's goroutine runs.
	if r, ok := tr.take(); !ok || r.Late != 10*time.Millisecond || r.Wakes != 1 {
		t.Fatalf("the sample during the stall: %+v, %v; want the 10ms wake-up before it", r, ok)
	}
	tr.woke(at(4002))
	tr.armed(at(4502))
	tr.woke(at(4503))
	tr.armed(at(5003))
	if r, ok := tr.take(); !ok || r.Late != 2992*time.Millisecond || r.Wakes != 2 {
		t.Fatalf("the sample after the stall: %+v, %v; want 2.992s of 2", r, ok)
	}
	tr.woke(at(5004))
	if r, ok := tr.take(); !ok || r.Late != time.Millisecond {
		t.Fatalf("the sample after that: %+v, %v; want 1ms, the stall counted once", r, ok)
	}
	// Stopped: nothing pending is counted.
	tr.armed(at(5504))
	tr.disarmed()
	tr.woke(at(9000))
	if r, ok := tr.take(); ok {
		t.Fatalf("disarmed: %+v", r)
	}
}

// fakeClock drives the loop without waiting: each sleep takes the
// lateness of its wake-up from lates, and advances the clock by the
// interval and that lateness.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	lates chan time.Duration
	// asleep receives each sleep's start, so that the test knows where the
	// loop is.
	asleep chan time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: epoch, lates: make(chan time.Duration), asleep: make(chan time.Duration, 100)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) bool {
	c.asleep <- d
	select {
	case <-ctx.Done():
		return false
	case late := <-c.lates:
		c.advance(d + late)
		return true
	}
}

func fakeMeter(interval time.Duration) (*Meter, *fakeClock) {
	c := newFakeClock()
	m := New(interval)
	m.now, m.sleep = c.now, c.sleep
	return m, c
}

// startFake starts a Meter on a fake clock, stopped when the test ends.
func startFake(t *testing.T, interval time.Duration) (*Meter, *fakeClock) {
	m, c := fakeMeter(interval)
	m.Start(context.Background())
	t.Cleanup(m.Stop)
	return m, c
}

func TestLoopTimesEachWakeUp(t *testing.T) {
	const interval = 500 * time.Millisecond
	m, c := startFake(t, interval)

	if d := <-c.asleep; d != interval {
		t.Fatalf("the loop sleeps %v, want the interval %v", d, interval)
	}
	// The first read after a start: no timer has fallen due.
	if r, ok := m.Take(); ok {
		t.Fatalf("before the first wake-up: %+v", r)
	}
	for _, late := range []time.Duration{3 * time.Millisecond, 620 * time.Millisecond, 40 * time.Millisecond} {
		c.lates <- late
		<-c.asleep
	}
	if r, ok := m.Take(); !ok || r.Late != 620*time.Millisecond || r.Wakes != 3 {
		t.Fatalf("after wake-ups 3ms, 620ms and 40ms late: %+v, %v", r, ok)
	}
	// The timer armed at the last wake-up, pending past its due: not
	// counted until it wakes, and then once.
	c.advance(interval + 250*time.Millisecond)
	if r, ok := m.Take(); ok {
		t.Fatalf("pending 250ms past due: %+v; want no reading until it wakes", r)
	}
	// Armed anew at each wake-up: the lateness is of one wake-up, not of
	// a phase kept from the start.
	c.lates <- 0 // the clock was advanced already: woke 250+500 ms after due
	<-c.asleep
	c.lates <- 5 * time.Millisecond
	<-c.asleep
	if r, ok := m.Take(); !ok || r.Late != 750*time.Millisecond || r.Wakes != 2 {
		t.Fatalf("%+v, %v; want the late wake-up (750ms), then 5ms", r, ok)
	}
}

// The timer is due on a fixed schedule, as a ticker is: after a late
// wake-up the loop sleeps only to the schedule's next due time after it,
// and a wake-up later than a whole interval skips the due times it missed.
func TestLoopKeepsTheSchedule(t *testing.T) {
	const interval = 500 * time.Millisecond
	m, c := startFake(t, interval)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Each wake-up's lateness, and the sleep the loop takes after it.
	if d := <-c.asleep; d != interval {
		t.Fatalf("the first sleep is %v, want one interval", d)
	}
	for _, step := range []struct {
		late, sleep time.Duration
	}{
		{0, interval},
		{ms(120), interval - ms(120)}, // to the next due time
		{ms(750), interval - ms(250)}, // the due time it missed is skipped
		{0, interval},
	} {
		c.lates <- step.late
		if d := <-c.asleep; d != step.sleep {
			t.Fatalf("woken %v late, the loop sleeps %v, want %v", step.late, d, step.sleep)
		}
	}
	if r, ok := m.Take(); !ok || r.Late != ms(750) || r.Wakes != 4 {
		t.Fatalf("%+v, %v; want 750ms of 4", r, ok)
	}
}

// With an origin, the schedule is the origin's: due at origin plus whole
// intervals, the first after the start.
func TestLoopFromAnOrigin(t *testing.T) {
	const interval = 500 * time.Millisecond
	for _, c := range []struct {
		origin time.Duration // from the start
		sleep  time.Duration
	}{
		{250 * time.Millisecond, 250 * time.Millisecond},
		{1250 * time.Millisecond, 250 * time.Millisecond},
		{-250 * time.Millisecond, 250 * time.Millisecond},
		{0, interval},
		{-interval, interval},
	} {
		m, clock := fakeMeter(interval)
		m.origin = epoch.Add(c.origin)
		ctx, cancel := context.WithCancel(context.Background())
		m.Start(ctx)
		if d := <-clock.asleep; d != c.sleep {
			t.Errorf("origin %v from the start: the first sleep is %v, want %v", c.origin, d, c.sleep)
		}
		cancel()
		m.Stop()
	}
}

func TestAfter(t *testing.T) {
	const h = 500 * time.Millisecond
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct{ due, now, want int }{
		{1000, 1000, 1500}, {1000, 1001, 1500}, {1000, 1499, 1500}, {1000, 1500, 2000}, {1000, 2750, 3000},
		{1000, 999, 1000}, {1000, 500, 1000}, {1000, 499, 500}, {1000, -1, 0}, {1000, 0, 500},
	} {
		if got := after(at(c.due), at(c.now), h); !got.Equal(at(c.want)) {
			t.Errorf("after(%d, %d) = %v, want %d", c.due, c.now, got.Sub(epoch), c.want)
		}
	}
}

func TestStartAndStop(t *testing.T) {
	m, c := fakeMeter(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	m.Start(ctx)
	m.Start(ctx) // running already: no second loop
	<-c.asleep
	c.lates <- time.Millisecond
	<-c.asleep
	m.Stop()
	select {
	case d := <-c.asleep:
		t.Fatalf("a second loop slept %v", d)
	default:
	}
	// What was seen before the stop is still read.
	c.advance(time.Hour)
	if r, ok := m.Take(); !ok || r.Late != time.Millisecond || r.Wakes != 1 {
		t.Fatalf("after Stop: %+v, %v", r, ok)
	}
	if r, ok := m.Take(); ok {
		t.Fatalf("after Stop, again: %+v", r)
	}
	m.Stop() // stopped already

	// The context ending ends the loop too; Stop then returns at once.
	m.Start(ctx)
	<-c.asleep
	cancel()
	m.Stop()

	// No interval, no loop.
	z := New(0)
	z.Start(context.Background())
	z.Stop()
	if _, ok := z.Take(); ok {
		t.Fatal("a meter of no interval read something")
	}
}

// The real loop, on the real clock, with the race detector: a meter whose
// timer is set for 5 ms reads its wake-ups, none before its first, and
// stops.
func TestRealLoop(t *testing.T) {
	m := New(5 * time.Millisecond)
	if _, ok := m.Take(); ok {
		t.Fatal("a meter not started read something")
	}
	m.Start(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	var wakes int
	for wakes < 10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		r, ok := m.Take()
		if ok && r.Late < 0 {
			t.Fatalf("negative lateness %v", r.Late)
		}
		wakes += r.Wakes
	}
	m.Stop()
	if wakes < 10 {
		t.Fatalf("%d wake-ups of a 5ms timer in 30s", wakes)
	}
	m.Take()
	if r, ok := m.Take(); ok {
		t.Fatalf("stopped, read %+v", r)
	}
}
