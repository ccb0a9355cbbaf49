package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Rewatch bounds each watch an informer makes (the API server ends it),
// leaves its lists alone, and with none set the watch is client-go's.
func TestRewatchBoundsTheWatches(t *testing.T) {
	for _, tc := range []struct {
		rewatch time.Duration
		want    *int64
	}{
		{0, nil},
		{7500 * time.Millisecond, ptrTo(int64(7))},
		{300 * time.Millisecond, ptrTo(int64(1))},
	} {
		var got *int64
		lw := &cache.ListWatch{WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			got = o.TimeoutSeconds
			return watch.NewFake(), nil
		}}
		c := &Client{rewatch: tc.rewatch}
		if _, err := c.rewatched(lw).WatchFuncWithContext(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("rewatch %v: timeoutSeconds %v, want %v", tc.rewatch, deref(got), deref(tc.want))
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}
