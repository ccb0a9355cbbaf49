package cli

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A component's parts share one lifetime: the first to fail ends the others
// and the component with its error, one that stops on its own while the
// component runs is a failure too, and the end of the component's context
// stops them all; runParts returns only once every part has.
func TestPartsShareOneLifetime(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		odd   func(ctx context.Context) error // the third part
		end   bool                            // the test ends the context
		want  string                          // the error; "" for nil
		wraps error                           // an error it must wrap
	}{
		{"a part fails", func(context.Context) error { return boom }, false, "third: boom", boom},
		{"a part stops while the others run", func(context.Context) error { return nil }, false, "third: stopped while the component runs", nil},
		{"the context ends", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stopped atomic.Int32
			waiter := func(ctx context.Context) error {
				<-ctx.Done()
				time.Sleep(10 * time.Millisecond) // a part that takes a moment to stop
				stopped.Add(1)
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runParts(ctx, part{"first", waiter}, part{"second", waiter}, part{"third", tc.odd}) }()
			if tc.end {
				cancel()
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("runParts did not return within a minute")
			}
			if n := stopped.Load(); n != 2 {
				t.Errorf("runParts returned with %d of the 2 other parts stopped", n)
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
				t.Errorf("runParts returned %v, want %q", err, tc.want)
			}
			if tc.wraps != nil && !errors.Is(err, tc.wraps) {
				t.Errorf("%v does not wrap the part's error %v", err, tc.wraps)
			}
		})
	}
}
