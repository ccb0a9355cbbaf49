package nodeevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The writer of the Events is client-go's core/v1 recorder (tools/record,
// the one the kubelet writes its Node events with) redone for the one kind
// of object and the one source fleet-role records: the same Event objects,
// named the same way, counted, folded and rate-limited by the same rules
// and figures, written from one queue in the same order with the same
// retries. Not tools/record itself: counting a repeat, it makes its patch
// with the strategic merge patch code, which imports OpenAPI's schema code
// and protobuf's descriptors, whose start-up cost every process of the one
// binary (the probe on every node) would carry (docs/performance.md, "What
// the executable links"). A repeat's patch here is a JSON merge patch of the
// three fields the recorder's strategic one changes (count, lastTimestamp,
// message), which the API server applies alike to an Event.

// The figures of client-go's recorder (tools/record, event.go and
// events_cache.go), kept so that fleet-role's Events behave as every other
// component's do.
const (
	// QueueLength is how many Events wait for the writer before a new
	// one is dropped (maxQueuedEvents): recording never blocks a
	// decision.
	QueueLength = 1000
	// MaxTries is how many times an Event is written before it is given
	// up, when the API server cannot be reached (maxTriesPerEvent).
	MaxTries = 12
	// RetryDelay is the wait between tries; the first is drawn at random
	// up to it, so that writers restarted together do not retry in step
	// (defaultSleepDuration).
	RetryDelay = 10 * time.Second
	// cacheEntries bounds each of the correlator's caches
	// (maxLruCacheEntries).
	cacheEntries = 4096
	// SimilarEvents similar Events (same Node, type and reason, other
	// messages) within SimilarInterval are folded into one whose message
	// says so (defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds).
	SimilarEvents   = 10
	SimilarInterval = 600 * time.Second
	// SpamBurst Events on one Node of one type pass at once; then one per
	// SpamEvery (defaultSpamBurst, defaultSpamQPS).
	SpamBurst = 25
	SpamEvery = 300 * time.Second
	// combinedPrefix begins a folded Event's message
	// (EventAggregatorByReasonMessageFunc).
	combinedPrefix = "(combined from similar events): "
)

// Sink is where the Events are written: the API server's core/v1 Events
// (kube.EventSink). Errors are the API's (apierrors) or the transport's.
type Sink interface {
	Create(ctx context.Context, e *corev1.Event) (*corev1.Event, error)
	// MergePatch applies a JSON merge patch to the Event named name.
	MergePatch(ctx context.Context, namespace, name string, patch []byte) (*corev1.Event, error)
}

// Recorder records a decision's Events on the Nodes. A nil Recorder
// records nothing.
type Recorder struct {
	sink      Sink
	clock     clock.Clock
	log       *slog.Logger
	component string

	queue  chan *corev1.Event
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	corr   *correlator

	mu      sync.Mutex
	dropped int
}

// Start begins writing Events to sink as source component, reading time
// from clk; Stop ends it.
func Start(sink Sink, component string, clk clock.Clock, log *slog.Logger) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{sink: sink, clock: clk, log: log, component: component,
		queue: make(chan *corev1.Event, QueueLength), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		corr: newCorrelator(clk)}
	go r.write()
	return r
}

// Stop drops the Events not yet written and ends the writer, waiting for
// it, as client-go's broadcaster's Shutdown does.
func (r *Recorder) Stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// Dropped is how many Events found the queue full.
func (r *Recorder) Dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// event is the Event client-go's recorder makes for node (makeEvent): named
// after the Node and the time, in namespace default (where the API server
// admits an Event about an object without a namespace), about the Node by
// kind, name and UID.
func (r *Recorder) event(node *corev1.Node, eventType, reason, message string) *corev1.Event {
	t := metav1.NewTime(r.clock.Now())
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", node.Name, t.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID,
			ResourceVersion: node.ResourceVersion},
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventType,
		Source:              corev1.EventSource{Component: r.component},
		ReportingController: r.component,
	}
}

// enqueue hands e to the writer, or drops it when the queue is full.
func (r *Recorder) enqueue(e *corev1.Event) {
	select {
	case r.queue <- e:
	default:
		r.mu.Lock()
		r.dropped++
		r.mu.Unlock()
		r.log.Warn("an Event is dropped: the queue of Events to write is full", "node", e.InvolvedObject.Name, "reason", e.Reason, "queue", QueueLength)
	}
}

// write writes the queued Events one at a time until Stop.
func (r *Recorder) write() {
	defer close(r.done)
	for {
		select {
		case <-r.ctx.Done():
			return
		case e := <-r.queue:
			r.writeOne(e)
		}
	}
}

// writeOne correlates e and writes it, retrying while the API server cannot
// be reached (recordToSink).
func (r *Recorder) writeOne(e *corev1.Event) {
	c, skip := r.corr.correlate(e)
	if skip {
		return
	}
	for try := 1; ; try++ {
		if r.writeTry(c) {
			return
		}
		if try >= MaxTries {
			r.log.Error("an Event is given up: the API server could not be reached", "node", c.event.InvolvedObject.Name, "reason", c.event.Reason, "tries", MaxTries)
			return
		}
		delay := RetryDelay
		if try == 1 {
			delay = time.Duration(float64(delay) * rand.Float64())
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.clock.After(delay):
		}
	}
}

// writeTry writes c once: it reports false when the try should be made
// again (the API server not reached), true when it is done, written or
// refused for good (recordEvent).
func (r *Recorder) writeTry(c correlated) bool {
	var (
		written *corev1.Event
		err     error
	)
	if c.patch != nil {
		written, err = r.sink.MergePatch(r.ctx, c.event.Namespace, c.event.Name, c.patch)
	}
	// A repeat's Event may have expired (the API server keeps Events an
	// hour): it is written anew.
	if c.patch == nil || apierrors.IsNotFound(err) {
		e := c.event.DeepCopy()
		e.ResourceVersion = ""
		written, err = r.sink.Create(r.ctx, e)
	}
	if err == nil {
		r.corr.written(written)
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if apierrors.IsAlreadyExists(err) {
			r.log.Debug("an Event exists already", "event", c.event.Name)
		} else {
			r.log.Error("an Event is refused", "node", c.event.InvolvedObject.Name, "reason", c.event.Reason, "err", err)
		}
		return true
	}
	if r.ctx.Err() != nil {
		return true
	}
	return false
}

// correlated is an Event as the correlator passes it on: the Event to
// write and, for a repeat of one written, the patch that counts it there.
type correlated struct {
	event *corev1.Event
	patch []byte
}

// correlator is client-go's EventCorrelator with its default options: it
// folds similar Events, counts repeats on the Event written first, and
// rate-limits each object and type. Only the writer calls it.
type correlator struct {
	clock clock.Clock
	// similar: by aggregate key, the messages seen within the interval.
	similar *lru.Cache
	// seen: by event key, the Event written for it.
	seen *lru.Cache
	// spam: by spam key, its token bucket.
	spam *lru.Cache
}

type similarRecord struct {
	messages map[string]struct{}
	last     time.Time
}

type seenRecord struct {
	count           int32
	first           metav1.Time
	name            string
	resourceVersion string
}

func newCorrelator(clk clock.Clock) *correlator {
	return &correlator{clock: clk, similar: lru.New(cacheEntries), seen: lru.New(cacheEntries), spam: lru.New(cacheEntries)}
}

// correlate is EventCorrelate: fold, then count, then filter.
func (c *correlator) correlate(e *corev1.Event) (correlated, bool) {
	folded, key := c.fold(e)
	out, patch := c.count(folded, key)
	if c.limited(out) {
		return correlated{}, true
	}
	return correlated{event: out, patch: patch}, false
}

// fold is EventAggregate: the SimilarEvents-th message of one Node, type
// and reason within SimilarInterval of the last makes an Event of its own
// that says it is combined, counted from then on in place of each.
func (c *correlator) fold(e *corev1.Event) (*corev1.Event, string) {
	now := metav1.NewTime(c.clock.Now())
	group := aggregateKey(e)
	var rec similarRecord
	if v, ok := c.similar.Get(group); ok {
		rec = v.(similarRecord)
	}
	if now.Sub(rec.last) > SimilarInterval {
		rec = similarRecord{messages: map[string]struct{}{}}
	}
	rec.messages[e.Message] = struct{}{}
	rec.last = now.Time
	c.similar.Add(group, rec)
	if len(rec.messages) < SimilarEvents {
		return e, eventKey(e)
	}
	// The set grows no further than the threshold.
	for m := range rec.messages {
		delete(rec.messages, m)
		break
	}
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", e.InvolvedObject.Name, now.UnixNano()), Namespace: e.Namespace},
		Count:          1,
		FirstTimestamp: now,
		InvolvedObject: e.InvolvedObject,
		LastTimestamp:  now,
		Message:        combinedPrefix + e.Message,
		Type:           e.Type,
		Reason:         e.Reason,
		Source:         e.Source,
	}, group
}

// count is eventObserve: an Event whose key was written before is counted on
// that one, with a patch of its count, last time and message.
func (c *correlator) count(e *corev1.Event, key string) (*corev1.Event, []byte) {
	out := e.DeepCopy()
	var patch []byte
	if v, ok := c.seen.Get(key); ok {
		last := v.(seenRecord)
		out.Name = last.name
		out.ResourceVersion = last.resourceVersion
		out.FirstTimestamp = last.first
		out.Count = last.count + 1
		// Three fields and no other: a merge patch of them is what the
		// recorder's two-way strategic patch amounts to.
		patch, _ = json.Marshal(struct {
			Count         int32       `json:"count"`
			LastTimestamp metav1.Time `json:"lastTimestamp"`
			Message       string      `json:"message"`
		}{out.Count, out.LastTimestamp, out.Message})
	}
	c.seen.Add(key, seenRecord{count: out.Count, first: out.FirstTimestamp, name: out.Name, resourceVersion: out.ResourceVersion})
	return out, patch
}

// written is updateState: what the API server holds now is what a repeat
// counts on.
func (c *correlator) written(e *corev1.Event) {
	c.seen.Add(eventKey(e), seenRecord{count: e.Count, first: e.FirstTimestamp, name: e.Name, resourceVersion: e.ResourceVersion})
}

// limited is the spam filter: true when e's object and type have used
// their burst and the bucket has not refilled.
func (c *correlator) limited(e *corev1.Event) bool {
	key := spamKey(e)
	var bucket flowcontrol.PassiveRateLimiter
	if v, ok := c.spam.Get(key); ok {
		bucket = v.(flowcontrol.PassiveRateLimiter)
	} else {
		bucket = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(float32(1/SpamEvery.Seconds()), SpamBurst, c.clock)
		c.spam.Add(key, bucket)
	}
	return !bucket.TryAccept()
}

func objectKey(e *corev1.Event) []string {
	o := e.InvolvedObject
	return []string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Type}
}

// eventKey is getEventKey: what makes two Events the same one.
func eventKey(e *corev1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID), o.APIVersion,
		e.Type, e.Reason, e.Message}, "")
}

// aggregateKey is EventAggregatorByReasonFunc's: what makes two Events
// similar.
func aggregateKey(e *corev1.Event) string {
	return strings.Join(append(objectKey(e), e.Reason, e.ReportingController, e.ReportingInstance), "")
}

// spamKey is getSpamKey: what one rate limit is kept for.
func spamKey(e *corev1.Event) string { return strings.Join(objectKey(e), "") }
