package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/probetest"
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

// The controller command ends with the context it was run with, not only
// with a signal: its parts (the informers, the metrics server, the loop)
// stop, and the command returns 0 once they all have; its metrics port is
// then closed.
func TestControllerEndsWithItsContext(t *testing.T) {
	c := probetest.Start(t)
	c.AddNodes(t, probetest.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.13.1"})
	kc := c.Kubeconfig(t, probetest.ControllerSA)
	addr := freeAddr(t)
	t.Setenv("FLEET_ROLE_DRY_RUN", "true")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		args := append([]string{"controller", "--kubeconfig", kc, "--metrics-address", addr}, timeFlags(200*time.Millisecond)...)
		code <- MainContext(ctx, args, &out, &errb)
	}()
	probetest.Eventually(t, time.Minute, func() error {
		select {
		case n := <-code:
			t.Fatalf("the controller exited %d before its context ended: %s", n, errb.String())
		default:
		}
		if _, ok := c.Data(t, "fleet-role-status")[status.StatusKey]; !ok {
			return errors.New("no status written yet")
		}
		if status, _, err := get("http://" + addr + "/readyz"); err != nil || status != 200 {
			return fmt.Errorf("/readyz %d %v", status, err)
		}
		return nil
	})
	ended := time.Now()
	cancel()
	select {
	case n := <-code:
		if n != ExitOK {
			t.Errorf("exit %d after its context ended, want 0: %s", n, errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the controller did not return within a minute of its context ending")
	}
	if _, _, err := get("http://" + addr + "/healthz"); err == nil {
		t.Error("the metrics server still answers after the command returned")
	}
	if !strings.Contains(errb.String(), `"controller stopped"`) {
		t.Errorf("no 'controller stopped' line in the log:\n%s", errb.String())
	}
	t.Logf("returned %v after its context ended", time.Since(ended).Round(time.Millisecond))
}
