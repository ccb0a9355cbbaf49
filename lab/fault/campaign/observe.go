//go:build linux

package campaign

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// observer sees every status the controller publishes: a watch on the
// status ConfigMap, restarted from a fresh read whenever it ends, each
// status kept once by the time of its decision.
type observer struct {
	admin           kubernetes.Interface
	namespace, name string

	mu        sync.Mutex
	decisions []Decision
	seen      map[time.Time]bool
	last      *status.Status
	changed   chan struct{} // closed and replaced at every new status
	err       error         // the last error reading the status
}

func newObserver(admin kubernetes.Interface, namespace, name string) *observer {
	return &observer{admin: admin, namespace: namespace, name: name, seen: map[time.Time]bool{}, changed: make(chan struct{})}
}

// run watches until ctx ends.
func (o *observer) run(ctx context.Context) {
	for ctx.Err() == nil {
		rv, err := o.read(ctx)
		if err == nil {
			err = o.watch(ctx, rv)
		}
		if err != nil {
			o.mu.Lock()
			o.err = err
			o.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

// read takes the status as it stands and returns its resourceVersion.
func (o *observer) read(ctx context.Context) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cm, err := o.admin.CoreV1().ConfigMaps(o.namespace).Get(rctx, o.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read %s: %w", o.name, err)
	}
	o.add(cm)
	return cm.ResourceVersion, nil
}

func (o *observer) watch(ctx context.Context, rv string) error {
	w, err := o.admin.CoreV1().ConfigMaps(o.namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", o.name).String(),
		ResourceVersion: rv,
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", o.name, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil // the server ended it: read again, then watch again
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("watch %s: %v", o.name, ev.Object)
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				o.add(cm)
			}
		}
	}
}

func (o *observer) add(cm *corev1.ConfigMap) {
	raw, ok := cm.Data[status.StatusKey]
	if !ok {
		return
	}
	st, err := status.UnmarshalStatus([]byte(raw))
	if err != nil {
		o.mu.Lock()
		o.err = fmt.Errorf("decode the status: %w", err)
		o.mu.Unlock()
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[st.GeneratedAt] {
		return
	}
	o.seen[st.GeneratedAt] = true
	o.decisions = append(o.decisions, decisionOf(st))
	if o.last == nil || st.GeneratedAt.After(o.last.GeneratedAt) {
		o.last = st
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// latest is the newest status seen, and a channel closed when a newer one
// arrives.
func (o *observer) latest() (*status.Status, <-chan struct{}, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.changed, o.err
}

// all is every decision seen, in the order of their times.
func (o *observer) all() []Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.SortedFunc(slices.Values(o.decisions), func(a, b Decision) int { return a.Time.Compare(b.Time) })
}

// decisionOf is what decisions.jsonl keeps of a status.
func decisionOf(st *status.Status) Decision {
	d := Decision{Time: st.GeneratedAt, Action: st.Decision.Action, Hosts: map[string]string{}}
	if d.Action == status.ActionSwap {
		d.Out, d.In = st.Decision.Out, st.Decision.In
	}
	for _, h := range st.Hosts {
		d.Hosts[h.Name] = string(h.Verdict)
		if h.Verdict != status.Unfit {
			continue
		}
		if d.UnfitBy == nil {
			d.UnfitBy = map[string][]string{}
		}
		for _, r := range h.Reasons {
			if !r.OK && !slices.Contains(d.UnfitBy[h.Name], r.Signal) {
				d.UnfitBy[h.Name] = append(d.UnfitBy[h.Name], r.Signal)
			}
		}
	}
	for _, r := range st.Decision.Reasons {
		if !r.OK {
			d.Why = r.Signal + " " + r.Subject + ": " + status.Summary(r)
			break
		}
	}
	return d
}
