package controller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The election's rules, one try at a time on a fake clock. The Lease here
// is a map with the API server's compare-and-swap on resourceVersion: what
// these tests hold is the elector's arithmetic of time, which a real API
// server's latency would blur at the boundaries (at, just under and just
// over a duration). TestElectionOnAPIServer holds the same rules against
// the real API server, with two whole replicas.

// memLeases is one Lease in memory. read, when set, runs inside Get before
// it answers (a slow read: the test steps the clock, or renews the Lease
// as another holder would while the read is under way).
type memLeases struct {
	mu   sync.Mutex
	rec  *kube.LeaseRecord
	rv   int
	err  error // every call fails with it, when set
	read func()
}

func (l *memLeases) Get(ctx context.Context, name string) (kube.LeaseRecord, string, error) {
	l.mu.Lock()
	read := l.read
	l.mu.Unlock()
	if read != nil {
		read()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return kube.LeaseRecord{}, "", l.err
	}
	if l.rec == nil {
		return kube.LeaseRecord{}, "", fmt.Errorf("get lease %s: %w", name, kube.ErrNotFound)
	}
	return *l.rec, strconv.Itoa(l.rv), nil
}

func (l *memLeases) Create(ctx context.Context, name string, r kube.LeaseRecord) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return "", l.err
	}
	if l.rec != nil {
		return "", fmt.Errorf("create lease %s: %w", name, kube.ErrConflict)
	}
	return l.put(r), nil
}

func (l *memLeases) Update(ctx context.Context, name string, r kube.LeaseRecord, rv string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return "", l.err
	}
	if l.rec == nil || rv != strconv.Itoa(l.rv) {
		return "", fmt.Errorf("update lease %s at %s: %w", name, rv, kube.ErrConflict)
	}
	return l.put(r), nil
}

// put stores r as a Lease holds it: whole seconds.
func (l *memLeases) put(r kube.LeaseRecord) string {
	r.LeaseDuration = (r.LeaseDuration + time.Second - 1) / time.Second * time.Second
	l.rv++
	l.rec = &r
	return strconv.Itoa(l.rv)
}

// set writes the Lease as another writer would.
func (l *memLeases) set(r kube.LeaseRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.put(r)
}

func (l *memLeases) delete() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = nil
}

// memStatus is the status ConfigMap's data in memory.
type memStatus struct{ data map[string]string }

func (s *memStatus) Read(ctx context.Context, name string) (map[string]string, string, error) {
	if s.data == nil {
		return nil, "", fmt.Errorf("get configmap %s: %w", name, kube.ErrNotFound)
	}
	return s.data, "1", nil
}

func (s *memStatus) PatchKeyAt(ctx context.Context, name, key, value, rv string) (string, error) {
	return "", errors.New("not written in these tests")
}

func (s *memStatus) Create(ctx context.Context, name, key, value string) (string, error) {
	return "", errors.New("not made in these tests")
}

// testElection is the shipped timing.
func testElection(l kube.Leases, st kube.StatusStore, id string) controller.Election {
	return controller.Election{Leases: l, Status: st, Namespace: "fleet-role", Name: controller.LeaseName, Identity: id,
		LeaseDuration: controller.DefaultLeaseDuration, RenewDeadline: controller.DefaultRenewDeadline, RetryPeriod: controller.DefaultRetryPeriod}
}

func newElector(t *testing.T, e controller.Election, clk *clocktesting.FakeClock, log *bytes.Buffer) *controller.Elector {
	t.Helper()
	var h slog.Handler = slog.DiscardHandler
	if log != nil {
		h = slog.NewTextHandler(log, nil)
	}
	x, err := controller.NewElector(e, clk, slog.New(h), "fleet-role-status")
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func try(t *testing.T, x *controller.Elector, want controller.Attempt) {
	t.Helper()
	if got, err := x.Try(context.Background()); got != want {
		t.Fatalf("try: %s (%v), want %s", got, err, want)
	}
}

// A follower waits out a foreign holder's lease duration, by its own clock
// from when it first saw the renewal, but never longer than its own lease
// duration: a Lease written to say a year keeps nobody following for a
// year. A shorter duration is honoured as written.
func TestFollowerHonoursAtMostItsOwnDuration(t *testing.T) {
	own := controller.DefaultLeaseDuration
	for _, c := range []struct {
		name    string
		written time.Duration
		waits   time.Duration
	}{
		{"a year, capped at its own", 365 * 24 * time.Hour, own},
		{"its own, just over (a second more)", own + time.Second, own},
		{"its own", own, own},
		{"just under its own (a second less)", own - time.Second, own - time.Second},
		{"the second a release writes", time.Second, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(t0)
			l := &memLeases{}
			l.set(kube.LeaseRecord{Holder: "foreign", LeaseDuration: c.written, AcquireTime: t0, RenewTime: t0, Transitions: 1})
			x := newElector(t, testElection(l, &memStatus{}, "b"), clk, nil)
			try(t, x, "held") // first sight: the wait counts from here
			clk.Step(c.waits - time.Nanosecond)
			try(t, x, "held")
			clk.Step(time.Nanosecond)
			try(t, x, "leads")
			if got := x.Term(); got != 2 {
				t.Errorf("term %d after taking over from term 1, want 2", got)
			}
		})
	}
}

// lostAnswer lands its next Update and answers as if the call were cut
// off: a renewal under way when the controller stops.
type lostAnswer struct {
	*memLeases
	lose bool
}

func (l *lostAnswer) Update(ctx context.Context, name string, r kube.LeaseRecord, rv string) (string, error) {
	got, err := l.memLeases.Update(ctx, name, r, rv)
	if l.lose && err == nil {
		l.lose = false
		return "", fmt.Errorf("update lease %s: %w", name, context.Canceled)
	}
	return got, err
}

// A release on a stop frees the Lease for the follower's next retry even
// when the renewal the stop cut off landed unseen (the resourceVersion the
// leader last saw is then old); it leaves alone a Lease another holds.
func TestReleaseFreesTheLease(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	l := &lostAnswer{memLeases: &memLeases{}}
	a := newElector(t, testElection(l, &memStatus{}, "a"), clk, nil)
	try(t, a, "leads")
	clk.Step(controller.DefaultRetryPeriod)
	l.lose = true
	try(t, a, "failed") // landed, its answer lost
	if err := a.Release(context.Background()); err != nil {
		t.Fatalf("release after a renewal that landed unseen: %v", err)
	}
	rec, _, _ := l.Get(context.Background(), controller.LeaseName)
	if rec.Holder != "" || rec.LeaseDuration != time.Second {
		t.Fatalf("after the release the Lease holds %q for %v, want no holder for 1s", rec.Holder, rec.LeaseDuration)
	}
	b := newElector(t, testElection(l, &memStatus{}, "b"), clk, nil)
	try(t, b, "leads") // at its next retry, not a lease duration on

	// Released again, by a that no longer holds it: b keeps it.
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := l.Get(context.Background(), controller.LeaseName); rec.Holder != "b" {
		t.Errorf("a's second release left the Lease to %q, want b's", rec.Holder)
	}
}

// A read that takes long may return a renewal made while it was under way:
// the follower counts the lease duration from when the read returned, not
// from when it was sent, so that it never takes over before the holder's
// renew deadline (counted from before that renewal) has run out.
func TestSlowReadStampsWhenItReturns(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	l := &memLeases{}
	l.set(kube.LeaseRecord{Holder: "a", LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: t0, RenewTime: t0})
	x := newElector(t, testElection(l, &memStatus{}, "b"), clk, nil)
	try(t, x, "held")
	// The next read takes 8 s; a renews 7 s into it (a's renew deadline
	// then ends 10 s after that renewal, at 17 s from the read's start).
	const slow, renewAt = 8 * time.Second, 7 * time.Second
	sent := clk.Now()
	l.read = func() {
		clk.Step(renewAt)
		l.set(kube.LeaseRecord{Holder: "a", LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: t0, RenewTime: clk.Now()})
		clk.Step(slow - renewAt)
	}
	try(t, x, "held")
	l.read = nil
	returned := clk.Now()
	aUntil := sent.Add(renewAt).Add(controller.DefaultRenewDeadline)
	// Stamped when sent, b would take over at sent+15 s; stamped when the
	// read returned, at returned+15 s.
	clk.SetTime(sent.Add(controller.DefaultLeaseDuration))
	try(t, x, "held")
	clk.SetTime(returned.Add(controller.DefaultLeaseDuration).Add(-time.Nanosecond))
	try(t, x, "held")
	clk.SetTime(returned.Add(controller.DefaultLeaseDuration))
	if !clk.Now().After(aUntil) {
		t.Fatalf("the test's own arithmetic: b's takeover %v is not after a's renew deadline %v", clk.Now(), aUntil)
	}
	try(t, x, "leads")
}

// The Lease deleted after a follower's last read, which found it expired:
// another replica took it over unseen by the follower between that read
// and the deletion, and leads on until its next renewal finds it gone. The
// follower waits a lease duration from its first read that found the
// Lease gone before making it anew, so the two never lead at once
// (TestElectionOnAPIServer saw 50 ms of two leaders without it). A
// follower that never read a Lease makes it at once.
func TestLeaseDeletedAfterAnUnseenTakeover(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	l := &memLeases{}
	// A foreign holder's Lease, read by c and a, then expired.
	l.set(kube.LeaseRecord{Holder: "foreign", LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: t0, RenewTime: t0, Transitions: 3})
	a := newElector(t, testElection(l, &memStatus{}, "a"), clk, nil)
	c := newElector(t, testElection(l, &memStatus{}, "c"), clk, nil)
	try(t, c, "held")
	try(t, a, "held")
	clk.Step(controller.DefaultLeaseDuration)
	// a takes it over; c does not read it before the deletion.
	try(t, a, "leads")
	l.delete()
	clk.Step(controller.DefaultRetryPeriod)
	gone := clk.Now()
	try(t, c, "held")
	if !a.Leading() {
		t.Fatal("a stopped leading before its next renewal")
	}
	clk.SetTime(gone.Add(controller.DefaultLeaseDuration - time.Nanosecond))
	try(t, c, "held")
	try(t, a, "gone") // a's renewal finds the Lease gone: its term ends
	a.StepDown()
	clk.SetTime(gone.Add(controller.DefaultLeaseDuration))
	try(t, c, "leads")

	// A process that never read a Lease, with none there, makes it at once.
	fresh := &memLeases{}
	b := newElector(t, testElection(fresh, &memStatus{}, "b"), clk, nil)
	try(t, b, "leads")
}

// A leader that sees another holder stops leading at that moment, not at
// the end of its own renew deadline; one whose Lease was deleted stops too
// and runs for a new term, whose number is above every term it saw and the
// term the status names: terms never go back.
func TestStepDownAndTermsNeverGoBack(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	l := &memLeases{}
	a := newElector(t, testElection(l, &memStatus{}, "a"), clk, nil)
	try(t, a, "leads")
	if got := a.Term(); got != 1 {
		t.Fatalf("a's first term %d, want 1 (a Lease made anew, no status)", got)
	}
	clk.Step(controller.DefaultRetryPeriod)
	try(t, a, "leads")

	// Another holder, seen by the leader's renewal: it steps down then.
	l.set(kube.LeaseRecord{Holder: "c", LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: clk.Now(), RenewTime: clk.Now(), Transitions: 5})
	clk.Step(controller.DefaultRetryPeriod)
	if !a.Leading() {
		t.Fatal("a stopped leading before it saw another holder")
	}
	try(t, a, "held")
	// What renew does on that answer.
	a.StepDown()
	if a.Leading() {
		t.Fatal("a still leads after stepping down, within its renew deadline")
	}

	// The Lease deleted while a leads again: a's next renewal finds it
	// gone and ends the term; its next try makes a term above 5.
	clk.Step(controller.DefaultLeaseDuration)
	try(t, a, "leads")
	if got := a.Term(); got != 6 {
		t.Fatalf("a took over from term 5 with term %d, want 6", got)
	}
	l.delete()
	clk.Step(controller.DefaultRetryPeriod)
	try(t, a, "gone")
	a.StepDown()
	try(t, a, "leads")
	if got := a.Term(); got != 7 {
		t.Errorf("a's term after the Lease was made anew: %d, want 7 (above the 6 it held)", got)
	}

	// Deleted under a holder another process saw: that one waits out a
	// lease duration from its first read that found the Lease gone before
	// it makes the Lease anew (the holder writes until its next renewal
	// finds it gone): at, just under and just over.
	c := newElector(t, testElection(l, &memStatus{}, "c"), clk, nil)
	clk.Step(controller.DefaultRetryPeriod)
	try(t, a, "leads")
	try(t, c, "held")
	l.delete()
	clk.Step(controller.DefaultRetryPeriod)
	gone := clk.Now()
	try(t, c, "held")
	clk.SetTime(gone.Add(controller.DefaultLeaseDuration - time.Nanosecond))
	try(t, c, "held")
	clk.SetTime(gone.Add(controller.DefaultLeaseDuration))
	try(t, c, "leads")
	if got := c.Term(); got != 8 {
		t.Errorf("c's term after waiting out a's deleted term 7: %d, want 8", got)
	}
	a.StepDown()

	// A new process (a restart: it remembers nothing) finds no Lease and a
	// status written in term 41: its term is 42.
	l.delete()
	doc, err := (&status.Status{Schema: status.Schema, Writer: &status.Writer{Identity: "old", Term: 41}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := status.UnmarshalStatus(doc); err != nil {
		t.Fatalf("the test's status does not read back: %v", err)
	}
	b := newElector(t, testElection(l, &memStatus{data: map[string]string{status.StatusKey: string(doc)}}, "b"), clk, nil)
	try(t, b, "leads")
	if got := b.Term(); got != 42 {
		t.Errorf("a new process's term with no Lease and the status at term 41: %d, want 42", got)
	}
	// And one that finds a Lease made anew at term 0 by another writer
	// takes over above the highest it saw.
	l.set(kube.LeaseRecord{Holder: "", LeaseDuration: time.Second, RenewTime: clk.Now()})
	clk.Step(controller.DefaultRetryPeriod)
	try(t, b, "gone") // emptied under it by another: its term is over
	b.StepDown()
	try(t, b, "leads")
	if got := b.Term(); got != 43 {
		t.Errorf("term after a Lease made anew at 0: %d, want 43", got)
	}
}

// Every failed try says why in the log, and the readiness of a controller
// whose tries fail names the cause; once it reads the Lease, a follower is
// ready and says who leads.
func TestFailedTriesSayWhy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	forbidden := fmt.Errorf("get lease fleet-role/fleet-role: %w: leases.coordination.k8s.io \"fleet-role\" is forbidden", kube.ErrForbidden)
	l := &memLeases{err: forbidden}
	log := &syncBuffer{}
	c := runElected(t, clk, l, log)
	// Three tries: the first at once, then one a jittered retry period.
	const tries = 3
	for i := range tries {
		testkit.Eventually(t, 10*time.Second, func() error {
			if n := strings.Count(log.String(), "try for the lease failed"); n <= i {
				return fmt.Errorf("%d failed tries logged, want %d", n, i+1)
			}
			return nil
		})
		if i < tries-1 {
			waitForTimer(t, clk)
			clk.Step(controller.DefaultRetryPeriod * 22 / 10)
		}
	}
	if n := strings.Count(log.String(), "forbidden"); n < tries {
		t.Errorf("%d log lines name the cause (forbidden) of %d failed tries:\n%s", n, tries, log.String())
	}
	_, rerr := c.Ready()
	if rerr == nil || !errors.Is(rerr, kube.ErrForbidden) || !strings.Contains(rerr.Error(), "not leading") {
		t.Errorf("readiness while every try is forbidden: %v, want not ready, saying not leading and why (forbidden)", rerr)
	}

	// The Lease readable, and held by another: ready, following, naming it.
	l.mu.Lock()
	l.err = nil
	l.mu.Unlock()
	l.set(kube.LeaseRecord{Holder: "b", LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: clk.Now(), RenewTime: clk.Now()})
	waitForTimer(t, clk)
	clk.Step(controller.DefaultRetryPeriod * 22 / 10)
	testkit.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(log.String(), "holder=b") {
			return errors.New("no log line names the holder b yet")
		}
		return nil
	})
	note, rerr := c.Ready()
	if rerr != nil || !strings.Contains(note, "following: b holds the lease") {
		t.Errorf("readiness following b: %q, %v; want ready, naming b", note, rerr)
	}
}

// runElected runs a controller of a large fleet for the Lease l as "a", on
// clk, logging to log, until the test ends.
func runElected(t *testing.T, clk *clocktesting.FakeClock, l *memLeases, log *syncBuffer) *controller.Controller {
	t.Helper()
	cfg, _ := largeFleet(t, 0)
	cfg.Clock = clk
	cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	c, err := controller.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.RunElected(ctx, testElection(l, &memStatus{}, "a")) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return c
}

// syncBuffer is a log two goroutines may use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitForTimer waits until the elector waits on clk's timer, so that a step
// of the clock reaches it (the goroutine under test runs at once on a
// stepped clock; the bound is for a busy machine).
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() error {
		if !clk.HasWaiters() {
			return errors.New("the elector is not waiting on the clock yet")
		}
		return nil
	})
}

// A follower reads the holder's clock off its renewals: each renewal's time
// (the holder's clock) less when it was first seen (the follower's), at
// most how far the holder's clock is ahead and short of it by how late the
// renewal was seen; the largest reading of one holder is kept, and a new
// holder starts anew. Its own renewals say nothing.
func TestFollowerReadsTheHoldersClock(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	l := &memLeases{}
	x := newElector(t, testElection(l, &memStatus{}, "b"), clk, nil)
	if _, ok := x.ClockOf("a"); ok {
		t.Fatal("a clock known before any renewal was seen")
	}
	ahead := 5 * time.Minute
	renew := func(holder string, skew, seenLate time.Duration) {
		t.Helper()
		l.set(kube.LeaseRecord{Holder: holder, LeaseDuration: controller.DefaultLeaseDuration, AcquireTime: t0, RenewTime: clk.Now().Add(skew), Transitions: 1})
		clk.Step(seenLate)
		try(t, x, "held")
	}
	renew("a", ahead, 0)
	if got, ok := x.ClockOf("a"); !ok || got != ahead {
		t.Fatalf("a's clock %v ahead (known %v), want %v", got, ok, ahead)
	}
	// Seen a second late: a second short, and the closer reading stays.
	renew("a", ahead, time.Second)
	if got, _ := x.ClockOf("a"); got != ahead {
		t.Fatalf("a's clock %v ahead after a renewal seen late, want %v kept", got, ahead)
	}
	// Another holder, 3 minutes behind: a's reading is not its.
	renew("c", -3*time.Minute, 2*time.Second)
	if got, ok := x.ClockOf("c"); !ok || got != -3*time.Minute-2*time.Second {
		t.Fatalf("c's clock %v ahead (known %v), want %v", got, ok, -3*time.Minute-2*time.Second)
	}
	if _, ok := x.ClockOf("a"); ok {
		t.Fatal("a's clock still known after c took the Lease")
	}
}

// When the previous status counts as generated, by this clock: as written
// for this process's own, a controller's that ran for no Lease, or a
// writer whose clock reads within a lease duration of this one (at the
// tolerance, re-anchored; just under, as written); moved by the writer's
// clock beyond it, never later than it was read; and when it was read for
// a writer never seen renewing.
func TestPreviousAtReanchorsAnotherWritersClock(t *testing.T) {
	gen := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tol := controller.DefaultLeaseDuration
	prev := &status.Status{GeneratedAt: gen}
	readAt := gen.Add(10 * time.Second)
	known := func(ahead time.Duration) func(string) (time.Duration, bool) {
		return func(h string) (time.Duration, bool) { return ahead, h == "a" }
	}
	a := &status.Writer{Identity: "a"}
	for _, c := range []struct {
		name  string
		w     *status.Writer
		clock func(string) (time.Duration, bool)
		want  time.Time
	}{
		{"its own", &status.Writer{Identity: "self"}, known(time.Hour), time.Time{}},
		{"no writer", nil, known(time.Hour), time.Time{}},
		{"a clock never seen", &status.Writer{Identity: "z"}, known(time.Hour), readAt},
		{"just under the tolerance ahead", a, known(tol - time.Nanosecond), time.Time{}},
		{"just under the tolerance behind", a, known(-tol + time.Nanosecond), time.Time{}},
		{"at the tolerance ahead", a, known(tol), gen.Add(-tol)},
		{"at the tolerance behind, read after", a, known(-tol), readAt},
		{"5 minutes ahead", a, known(5 * time.Minute), gen.Add(-5 * time.Minute)},
		{"5 minutes behind, read before that would be: never after it was read", a, known(-5 * time.Minute), readAt},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := controller.PreviousAt(c.w, prev, "self", c.clock, readAt, tol); !got.Equal(c.want) {
				t.Fatalf("previous at %v, want %v", got, c.want)
			}
		})
	}
	// A writer 5 minutes behind, read 10 s after it wrote.
	if got := controller.PreviousAt(a, prev, "self", known(-5*time.Minute), gen.Add(5*time.Minute+10*time.Second), tol); !got.Equal(gen.Add(5 * time.Minute)) {
		t.Fatalf("a writer 5 minutes behind: previous at %v, want %v", got, gen.Add(5*time.Minute))
	}
	if got := controller.PreviousAt(a, nil, "self", known(time.Hour), readAt, tol); !got.IsZero() {
		t.Fatalf("no previous status: %v", got)
	}
}

// A holder that loses its Lease (its renewals fail for the renew deadline)
// stands aside for a lease duration before it runs again: it reads the
// Lease not once in that time, so that the record expires and a follower
// on a sounder path takes it over, and runs again once it has passed.
func TestLostHolderStandsAside(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	l := &memLeases{}
	var reads atomic.Int32
	l.read = func() { reads.Add(1) }
	log := &syncBuffer{}
	runElected(t, clk, l, log)
	logged := func(what string) func() error {
		return func() error {
			if !strings.Contains(log.String(), what) {
				return fmt.Errorf("no log line %q yet", what)
			}
			return nil
		}
	}
	testkit.Eventually(t, 10*time.Second, logged("leading: this controller decides"))
	// Cut off: every Lease call fails until the renew deadline passes.
	l.mu.Lock()
	l.err = errors.New("cut off")
	l.mu.Unlock()
	for i := 0; !strings.Contains(log.String(), "stands aside"); i++ {
		if i > 100 {
			t.Fatalf("the holder never lost its Lease:\n%s", log.String())
		}
		waitForTimer(t, clk)
		clk.Step(controller.DefaultRetryPeriod)
		// A yield, not a wait for a condition: the renewal and the decision
		// loop run on the stepped clock; the loop ends on the log line.
		time.Sleep(time.Millisecond)
	}
	testkit.Eventually(t, 10*time.Second, logged("stands aside"))
	lost := clk.Now()
	l.mu.Lock()
	l.err = nil
	l.mu.Unlock()
	before := reads.Load()
	// Up to two retry periods short of a lease duration after the loss
	// (the loss may have come a step before the log line was seen): no
	// read.
	for clk.Now().Before(lost.Add(controller.DefaultLeaseDuration - 2*controller.DefaultRetryPeriod)) {
		waitForTimer(t, clk)
		clk.Step(controller.DefaultRetryPeriod)
	}
	// A holder that ran again at once reads the Lease within moments of
	// its loss (without the standing aside this fails at once); the
	// elector now waits on the clock, which nothing steps meanwhile.
	time.Sleep(50 * time.Millisecond)
	if n := reads.Load() - before; n != 0 {
		t.Fatalf("the lost holder read the Lease %d times within a lease duration of its loss", n)
	}
	// Past it: it runs again.
	waitForTimer(t, clk)
	clk.Step(3 * controller.DefaultRetryPeriod)
	testkit.Eventually(t, 10*time.Second, func() error {
		if reads.Load() == before {
			return errors.New("the holder has not run for the Lease again")
		}
		return nil
	})
}
