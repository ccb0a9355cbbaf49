//go:build linux

package campaign

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/record"
)

// recordWatch sees every write of the voters' records through the API
// server and marks the spans in which a voter's record went unwritten past
// the freshness limit: the reported gate holds every swap then
// (docs/limits.md, gates), whatever holds the probe back (a stopped probe, a
// lossy path its writes crawl over, a starved host).
type recordWatch struct {
	admin     kubernetes.Interface
	namespace string
	stale     time.Duration

	mu      sync.Mutex
	written map[string]time.Time   // a record's last write, by its node
	writes  map[string][]time.Time // every write, by node
	spans   spans
}

func watchRecords(ctx context.Context, admin kubernetes.Interface, namespace string, voters []string, stale time.Duration) *recordWatch {
	w := &recordWatch{admin: admin, namespace: namespace, stale: stale,
		written: map[string]time.Time{}, writes: map[string][]time.Time{}, spans: newSpans()}
	now := time.Now()
	for _, v := range voters {
		w.written[v] = now // judged from the campaign's start
	}
	go w.watch(ctx)
	go w.check(ctx)
	return w
}

func (w *recordWatch) watch(ctx context.Context) {
	for ctx.Err() == nil {
		wi, err := w.admin.CoreV1().ConfigMaps(w.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: record.AnySelector})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				w.mu.Lock()
				// A record or its tail (the tail layout): either is a write.
				if _, voter := w.written[record.NodeOf(cm)]; voter {
					now := time.Now()
					w.written[record.NodeOf(cm)] = now
					w.writes[record.NodeOf(cm)] = append(w.writes[record.NodeOf(cm)], now)
				}
				w.mu.Unlock()
			}
		}
		wi.Stop()
	}
}

// check opens a voter's span once its record has gone unwritten past the
// freshness limit, and closes it at the next write.
func (w *recordWatch) check(ctx context.Context) {
	t := time.NewTicker(etcdWatchEvery / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		w.mu.Lock()
		for v, at := range w.written {
			// Stale from the freshness limit past its last write, until
			// the write that ends it.
			w.spans.mark(v, now.Sub(at) > w.stale, at.Add(w.stale), at)
		}
		w.mu.Unlock()
	}
}

// intervals is every voter's stale spans, those still open closed at now.
func (w *recordWatch) intervals(now time.Time) map[string][]Interval {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spans.all(now)
}

// longestUnwritten is, for each fault, the longest any voter's record went
// unwritten from its start to its end, and whose: how near the freshness
// limit the fault brought the records (a slow leader slows every write).
func (w *recordWatch) longestUnwritten(faults []Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range faults {
		f := &faults[i]
		for v, ts := range w.writes {
			last := f.Start
			for _, t := range append(slices.Clone(ts), f.End) {
				if t.Before(f.Start) || t.After(f.End) {
					continue
				}
				if gap := Duration(t.Sub(last)); gap > f.Unwritten.Longest {
					f.Unwritten = Unwritten{Longest: gap, Voter: v}
				}
				last = t
			}
		}
	}
}

// Unwritten is the longest a voter's record went unwritten during a fault.
type Unwritten struct {
	Longest Duration `json:"longest"`
	Voter   string   `json:"voter,omitempty"`
}
