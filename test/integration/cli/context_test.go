package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The controller command ends with the context it was run with, not only
// with a signal: its parts (the informers, the metrics server, the loop)
// stop, and the command returns 0 once they all have; its metrics port is
// then closed.
func TestControllerEndsWithItsContext(t *testing.T) {
	c := testkit.Start(t)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.13.1"})
	kc := c.Kubeconfig(t, testkit.ControllerSA)
	addr := freeAddr(t)
	t.Setenv("FLEET_ROLE_DRY_RUN", "true")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		args := append([]string{"controller", "--kubeconfig", kc, "--metrics-address", addr}, timeFlags(200*time.Millisecond)...)
		code <- cli.MainContext(ctx, args, &out, &errb)
	}()
	testkit.Eventually(t, time.Minute, func() error {
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
		if n != cli.ExitOK {
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
