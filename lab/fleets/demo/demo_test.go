package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// The demo end to end, as the README's first command runs it: real etcd
// members, the real probe and controller, the slow fault. It must name the
// slowed voter with the swap and leave no process or data behind. In the
// same run of the fleet (operators_test.go), a real Prometheus with the
// shipped rules fires no alert before the fault and the voter-unfit and
// swap-advised alerts for the slowed voter after it, and the controller's
// status page, loaded in a real Chromium, marks the slowed voter's links
// with the status's numbers and shows a record's crafted markup as text.
func TestDemoSlowVoterNamesTheSwap(t *testing.T) {
	t.Setenv("FLEET_ROLE_ETCD", testenv.Etcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	opt := Defaults()
	opt.Out = &out
	newOperators(t).options(&opt)
	// The phases that wait on Prometheus's alerts hold for their rules'
	// own times, which a busy machine can stretch (operators_test.go).
	opt.PhaseTimeout = 5 * time.Minute
	res, err := Run(ctx, opt)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	d := res.Status.Decision
	if d.Action != status.ActionSwap || d.Out != "voter-2" || !strings.HasPrefix(d.In, "standby-") {
		t.Fatalf("decision = %+v, want a swap of voter-2 for a standby\n%s", d, out.String())
	}
	if got := verdictOf(res.Status, "voter-2"); got != status.Unfit {
		t.Fatalf("voter-2 is %s, want unfit", got)
	}
	res.WriteSummary(&out, opt)
	for _, want := range []string{"== baseline", "== fault: voter-2", "would swap voter-2 out for standby-", "peer_rtt", "the whole status document: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	t.Logf("wall time %s, detected in %d periods; output:\n%s", res.Elapsed.Round(time.Second), res.Detected, out.String())
	assertGone(t, res)
}

// A paused host: its member stopped and its probe silent. The controller must
// say the probe has not reported and that it would not act.
func TestDemoPausedVoterHoldsEverySwap(t *testing.T) {
	t.Setenv("FLEET_ROLE_ETCD", testenv.Etcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	opt := Defaults()
	opt.Fault = FaultPause
	// A paused host is unknown once its record is older than the freshness
	// limit, three periods, whatever the period: at a quarter of the
	// default the baseline's full window of 50 samples takes 12.5 s where
	// it took 50, and nothing this test holds depends on the period.
	opt.Period = Defaults().Period / 4
	opt.Out = &out
	res, err := Run(ctx, opt)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if got := verdictOf(res.Status, "voter-2"); got != status.Unknown {
		t.Fatalf("voter-2 is %s, want unknown", got)
	}
	if res.Status.Decision.Action != status.ActionNone {
		t.Fatalf("decision = %+v, want none", res.Status.Decision)
	}
	var gate *status.Reason
	for i, r := range res.Status.Decision.Reasons {
		if r.Signal == status.GateReported && r.Subject == "voter-2" {
			gate = &res.Status.Decision.Reasons[i]
		}
	}
	if gate == nil || gate.OK || gate.Code != status.CodeVoterUnreported {
		t.Fatalf("gate_reported = %+v, want it failed naming voter-2", gate)
	}
	assertGone(t, res)
}

func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(*Options)
		want string
	}{
		{"fault", func(o *Options) { o.Fault = "flood" }, `--fault "flood"`},
		{"delay", func(o *Options) { o.Delay = 0 }, "--delay 0s"},
		{"period", func(o *Options) { o.Period = -time.Second }, "--period -1s"},
		// At 1 s the round-trip limit is 100 ms: a delay of 50 ms each way
		// makes a round trip exactly at it, which is fit.
		{"delay at the round-trip limit", func(o *Options) { o.Delay = 50 * time.Millisecond }, "--delay 50ms: a round trip through the slowed voter gains 2 x 50ms = 100ms, within the round-trip limit 100ms"},
		{"delay under the round-trip limit", func(o *Options) { o.Delay = 50*time.Millisecond - time.Nanosecond }, "within the round-trip limit 100ms"},
		{"election timeout", func(o *Options) { o.ElectionTimeout = 51 * time.Second }, "--election-timeout 51s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			tc.mut(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	o := Defaults()
	o.Delay = 50*time.Millisecond + time.Nanosecond
	if err := o.Validate(); err != nil {
		t.Fatalf("a delay just over half the round-trip limit refused: %v", err)
	}
	o = Defaults()
	o.ElectionTimeout = 2600 * time.Millisecond
	o.Delay = DelayFor(o.ElectionTimeout)
	if err := o.Validate(); err != nil || o.settings().HeartbeatInterval != 260*time.Millisecond {
		t.Fatalf("election timeout 2.6s: %v, heartbeat %s; want accepted with a heartbeat of 260ms", err, o.settings().HeartbeatInterval)
	}
}

// assertGone checks that no member process and no data outlive the demo.
func assertGone(t *testing.T, res *Result) {
	t.Helper()
	if len(res.PIDs) != voters {
		t.Fatalf("demo reported %d member processes, want %d", len(res.PIDs), voters)
	}
	for _, pid := range res.PIDs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("member process %d still exists after the demo (kill 0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(res.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s still exists (stat: %v)", res.DataDir, err)
	}
}

// The demo's own command maps a bad flag to a usage error (exit 2) that
// names it, before anything is started.
func TestMainRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault", "flood"}, `fleet-role-demo: --fault "flood"`},
		{[]string{"--period", "0s"}, "--period 0s"},
		{[]string{"--hold", "-1s"}, "--hold -1s: must be zero (no hold) or above"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"extra"}, `unknown command "extra"`},
	} {
		var out, errb bytes.Buffer
		if code := Main(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("Main(%q) = %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
