package nodeevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// store is an API server's Events as the test keeps them: by name, as JSON
// (so that what a patch leaves is what the server would hold).
type store struct {
	objects map[string][]byte
	rv      int
}

// write is what a writer does with a correlated Event (recordEvent): the
// repeat's patch applied to the Event it names, or, with no patch or no
// such Event, the Event created. apply applies a patch to an object.
func (s *store) write(t *testing.T, e *corev1.Event, patch []byte, apply func(orig, patch []byte) ([]byte, error)) *corev1.Event {
	t.Helper()
	s.rv++
	var out []byte
	if orig, ok := s.objects[e.Name]; ok && patch != nil {
		var err error
		if out, err = apply(orig, patch); err != nil {
			t.Fatalf("patch %s on %s: %v", patch, e.Name, err)
		}
	} else {
		c := e.DeepCopy()
		c.ResourceVersion = ""
		var err error
		if out, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	}
	var written corev1.Event
	if err := json.Unmarshal(out, &written); err != nil {
		t.Fatal(err)
	}
	written.ResourceVersion = fmt.Sprint(s.rv)
	out, _ = json.Marshal(&written)
	s.objects[e.Name] = out
	return &written
}

// The correlator decides as client-go's own (tools/record's
// EventCorrelator, with its defaults): on random sequences of Events on a
// few Nodes, of a few types, reasons and messages, at random steps of time
// across its intervals, with Events expiring on the server, every Event is
// skipped by both or by neither, passed on identical, and leaves the same
// object on the server, its merge patch applied as a JSON merge patch and
// client-go's as a strategic merge patch.
func TestCorrelatorAsClientGos(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 34))
			fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
			ours, theirs := newCorrelator(fc), record.NewEventCorrelator(fc)
			oursStore, theirsStore := &store{objects: map[string][]byte{}}, &store{objects: map[string][]byte{}}
			nodes := []*corev1.Node{
				{ObjectMeta: metav1.ObjectMeta{Name: "voter-1", UID: "u1", ResourceVersion: "7"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "voter-2", UID: "u2", ResourceVersion: "9"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "standby-1", UID: "u3", ResourceVersion: "11"}},
			}
			r := &Recorder{clock: fc, component: "fleet-role-controller"}
			var skipped, patched, folded int
			for i := range 4000 {
				// Bursts (the rate limit), minutes (the fold's interval),
				// and now and then a quiet past it.
				switch x := rng.IntN(100); {
				case x < 70:
					fc.Step(time.Duration(rng.IntN(3000)) * time.Millisecond)
				case x < 97:
					fc.Step(time.Duration(rng.IntN(120)) * time.Second)
				default:
					fc.Step(SimilarInterval + time.Duration(rng.IntN(60))*time.Second)
				}
				n := nodes[rng.IntN(len(nodes))]
				typ := []string{corev1.EventTypeNormal, corev1.EventTypeWarning}[rng.IntN(2)]
				// Unfit's messages repeat (counted) but are too few to
				// fold; SwapHeld's are each new (folded). Not both in one
				// reason: past the fold's threshold client-go forgets one
				// message at random (PopAny), so whether a repeat of an
				// old one folds again is not a function of the sequence.
				reason, msg := ReasonUnfit, fmt.Sprintf("message %d", rng.IntN(3))
				if rng.IntN(2) == 0 {
					reason, msg = ReasonSwapHeld, fmt.Sprintf("held %d", i)
				}
				e := r.event(n, typ, reason, msg)
				got, skip := ours.correlate(e.DeepCopy())
				want, err := theirs.EventCorrelate(e.DeepCopy())
				if err != nil {
					t.Fatalf("event %d: client-go's correlator: %v", i, err)
				}
				if skip != want.Skip {
					t.Fatalf("event %d (%s %s %q on %s): skipped %v, client-go's %v", i, typ, reason, msg, n.Name, skip, want.Skip)
				}
				if skip {
					skipped++
					continue
				}
				if !reflect.DeepEqual(got.event, want.Event) {
					t.Fatalf("event %d: passed on\n%+v\nclient-go's\n%+v", i, got.event, want.Event)
				}
				if (got.patch == nil) != (want.Patch == nil) {
					t.Fatalf("event %d: patch %s, client-go's %s", i, got.patch, want.Patch)
				}
				if got.patch != nil {
					patched++
				}
				if len(got.event.Message) > len(combinedPrefix) && got.event.Message[:len(combinedPrefix)] == combinedPrefix {
					folded++
				}
				// Now and then the server forgets an Event (its TTL):
				// the repeat's patch finds nothing and it is created.
				if rng.IntN(50) == 0 {
					delete(oursStore.objects, got.event.Name)
					delete(theirsStore.objects, want.Event.Name)
				}
				a := oursStore.write(t, got.event, got.patch, jsonpatch.MergePatch)
				b := theirsStore.write(t, want.Event, want.Patch, func(orig, p []byte) ([]byte, error) {
					return strategicpatch.StrategicMergePatch(orig, p, &corev1.Event{})
				})
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("event %d: the server holds\n%+v\nafter client-go's\n%+v", i, a, b)
				}
				ours.written(a)
				theirs.UpdateState(b)
			}
			t.Logf("4000 Events: %d skipped by the rate limit, %d counted on an Event written before, %d folded", skipped, patched, folded)
			if skipped == 0 || patched == 0 || folded == 0 {
				t.Errorf("the sequence tried too little: %d skipped, %d patched, %d folded", skipped, patched, folded)
			}
		})
	}
}

// newCorrelatorAt is a correlator on a fake clock, and a Recorder that
// makes its Events on that clock.
func newCorrelatorAt() (*clocktesting.FakeClock, *correlator, *Recorder) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	return fc, newCorrelator(fc), &Recorder{clock: fc, component: "fleet-role-controller"}
}

// The rate limit of one Node and type at its figures: SpamBurst Events pass
// at once and the next does not; SpamEvery later one more does, a moment
// before it none.
func TestCorrelatorRateLimitBoundaries(t *testing.T) {
	fc, c, r := newCorrelatorAt()
	n := voter
	pass := func(i int) bool {
		// Each its own reason and message: neither counted nor folded.
		_, skip := c.correlate(r.event(n, corev1.EventTypeNormal, fmt.Sprint("R", i), fmt.Sprint("m", i)))
		return !skip
	}
	for i := range SpamBurst {
		if !pass(i) {
			t.Fatalf("Event %d of the burst of %d skipped", i+1, SpamBurst)
		}
	}
	if pass(SpamBurst) {
		t.Fatalf("Event %d passed, past the burst of %d", SpamBurst+1, SpamBurst)
	}
	// Another type on the same Node has a bucket of its own.
	if _, skip := c.correlate(r.event(n, corev1.EventTypeWarning, "W", "w")); skip {
		t.Error("a Warning skipped by the Normal Events' limit")
	}
	fc.Step(SpamEvery - time.Second)
	if pass(100) {
		t.Errorf("an Event passed %v after the burst, before the bucket refills (%v)", SpamEvery-time.Second, SpamEvery)
	}
	fc.Step(time.Second)
	if !pass(101) {
		t.Errorf("no Event passed %v after the burst", SpamEvery)
	}
	if pass(102) {
		t.Error("two Events passed on one refill")
	}
}

// Folding at its figures: the SimilarEvents-1'th different message of one
// Node, type and reason passes as it is, the SimilarEvents'th comes out
// combined, and the next is counted on the combined one; past
// SimilarInterval of quiet the next is itself again.
func TestCorrelatorFoldBoundaries(t *testing.T) {
	fc, c, r := newCorrelatorAt()
	n := voter
	send := func(i int) correlated {
		fc.Step(time.Second) // within the spam limit's burst and the fold's interval
		got, skip := c.correlate(r.event(n, corev1.EventTypeWarning, ReasonSwapHeld, fmt.Sprint("held ", i)))
		if skip {
			t.Fatalf("message %d skipped", i)
		}
		return got
	}
	for i := 1; i < SimilarEvents; i++ {
		if got := send(i); got.event.Message != fmt.Sprint("held ", i) || got.patch != nil {
			t.Fatalf("message %d of %d: %q (patch %s), want it as it is", i, SimilarEvents, got.event.Message, got.patch)
		}
	}
	first := send(SimilarEvents)
	if want := combinedPrefix + fmt.Sprint("held ", SimilarEvents); first.event.Message != want || first.patch != nil {
		t.Fatalf("message %d: %q (patch %s), want %q written anew", SimilarEvents, first.event.Message, first.patch, want)
	}
	c.written(first.event)
	next := send(SimilarEvents + 1)
	if next.event.Name != first.event.Name || next.event.Count != 2 || next.patch == nil {
		t.Fatalf("message %d: %s count %d (patch %s), want counted on %s", SimilarEvents+1, next.event.Name, next.event.Count, next.patch, first.event.Name)
	}
	var p map[string]any
	if err := json.Unmarshal(next.patch, &p); err != nil || len(p) != 3 || p["count"] != float64(2) || p["message"] != combinedPrefix+fmt.Sprint("held ", SimilarEvents+1) {
		t.Errorf("the repeat's patch %s, want count, lastTimestamp and message alone", next.patch)
	}
	fc.Step(SimilarInterval + time.Second)
	if got := send(99); got.event.Message != "held 99" {
		t.Errorf("after %v of quiet: %q, want the message as it is", SimilarInterval, got.event.Message)
	}
}

// sink is an API server's Events as the writer tests see them: each call
// told on calls, its outcome taken from fail in turn; with hold set, a call
// says it entered and waits for hold to close.
type sink struct {
	calls   chan string
	fail    func(call int) error
	n       int
	entered chan struct{}
	hold    chan struct{}
}

func (s *sink) do(what string) error {
	if s.hold != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.hold
	}
	s.n++
	var err error
	if s.fail != nil {
		err = s.fail(s.n)
	}
	s.calls <- fmt.Sprintf("%s: %v", what, err)
	return err
}

func (s *sink) Create(_ context.Context, e *corev1.Event) (*corev1.Event, error) {
	if err := s.do("create " + e.Message); err != nil {
		return nil, err
	}
	return e, nil
}

func (s *sink) MergePatch(_ context.Context, namespace, name string, patch []byte) (*corev1.Event, error) {
	if err := s.do("patch " + string(patch)); err != nil {
		return nil, err
	}
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, nil
}

// next is the sink's next call, or a failure after a minute.
func (s *sink) next(t *testing.T) string {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(time.Minute):
		t.Fatal("no call of the sink within a minute")
		return ""
	}
}

// none holds that the sink is not called within a moment.
func (s *sink) none(t *testing.T, what string) {
	t.Helper()
	select {
	case c := <-s.calls:
		t.Fatalf("%s: the sink was called: %s", what, c)
	case <-time.After(200 * time.Millisecond):
	}
}

var voter = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "voter-1", UID: "u1"}}

// stepWhenWaiting steps fc by d once the writer waits on it.
func stepWhenWaiting(t *testing.T, fc *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not wait for its retry within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	fc.Step(d)
}

// An API server that cannot be reached is tried again, RetryDelay apart,
// up to MaxTries in all; one that refuses the Event is not.
func TestRecorderRetries(t *testing.T) {
	unreachable := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	t.Run("reached on the third try", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
		s := &sink{calls: make(chan string, 100), fail: func(n int) error {
			if n < 3 {
				return unreachable
			}
			return nil
		}}
		r := Start(s, "fleet-role-controller", fc, nil)
		defer r.Stop()
		r.enqueue(r.event(voter, corev1.EventTypeNormal, ReasonFit, "fit"))
		for try := 1; try <= 3; try++ {
			c := s.next(t)
			if want := "create fit: "; try == 3 && c != want+"<nil>" || try < 3 && c != want+unreachable.Error() {
				t.Fatalf("try %d: %s", try, c)
			}
			if try < 3 {
				stepWhenWaiting(t, fc, RetryDelay)
			}
		}
		s.none(t, "written on the third try")
	})
	t.Run("given up after MaxTries", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
		s := &sink{calls: make(chan string, 100), fail: func(int) error { return unreachable }}
		r := Start(s, "fleet-role-controller", fc, nil)
		defer r.Stop()
		r.enqueue(r.event(voter, corev1.EventTypeNormal, ReasonFit, "fit"))
		for try := 1; try <= MaxTries; try++ {
			s.next(t)
			if try < MaxTries {
				stepWhenWaiting(t, fc, RetryDelay)
			}
		}
		fc.Step(RetryDelay)
		s.none(t, fmt.Sprintf("after %d tries", MaxTries))
		if fc.HasWaiters() {
			t.Errorf("the writer waits to try again after %d tries", MaxTries)
		}
	})
	t.Run("refused", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
		s := &sink{calls: make(chan string, 100), fail: func(int) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))
		}}
		r := Start(s, "fleet-role-controller", fc, nil)
		defer r.Stop()
		r.enqueue(r.event(voter, corev1.EventTypeNormal, ReasonFit, "fit"))
		s.next(t)
		s.none(t, "refused")
		if fc.HasWaiters() {
			t.Error("the writer waits to try a refused Event again")
		}
	})
	t.Run("a repeat whose Event expired", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
		s := &sink{calls: make(chan string, 100), fail: func(n int) error {
			if n == 2 {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, "voter-1.x")
			}
			return nil
		}}
		r := Start(s, "fleet-role-controller", fc, nil)
		defer r.Stop()
		r.enqueue(r.event(voter, corev1.EventTypeNormal, ReasonFit, "fit"))
		fc.Step(time.Second)
		r.enqueue(r.event(voter, corev1.EventTypeNormal, ReasonFit, "fit"))
		got := []string{s.next(t), s.next(t), s.next(t)}
		if got[0] != "create fit: <nil>" || !strings.HasPrefix(got[1], `patch {"count":2,`) || got[2] != "create fit: <nil>" {
			t.Errorf("calls %q, want a create, the repeat's patch not found, and the repeat created", got)
		}
	})
}

// The queue at its length: with the writer held in a write, QueueLength
// Events wait and the next is dropped, counted; none blocks the caller.
func TestRecorderQueueFull(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	s := &sink{calls: make(chan string, 2*QueueLength), entered: make(chan struct{}, 1), hold: make(chan struct{})}
	r := Start(s, "fleet-role-controller", fc, nil)
	defer r.Stop()
	n := func(i int) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("host-", i), UID: types.UID(fmt.Sprint(i))}}
	}
	r.enqueue(r.event(n(0), corev1.EventTypeNormal, ReasonFit, "fit"))
	<-s.entered // the writer holds the first
	for i := 1; i <= QueueLength; i++ {
		r.enqueue(r.event(n(i), corev1.EventTypeNormal, ReasonFit, "fit"))
	}
	if d := r.Dropped(); d != 0 {
		t.Fatalf("%d dropped with %d waiting, the queue's length", d, QueueLength)
	}
	r.enqueue(r.event(n(QueueLength+1), corev1.EventTypeNormal, ReasonFit, "fit"))
	if d := r.Dropped(); d != 1 {
		t.Fatalf("%d dropped with %d waiting and one more, want 1", d, QueueLength)
	}
	close(s.hold)
	for range QueueLength + 1 {
		s.next(t)
	}
	s.none(t, "every queued Event written")
}
