package controller

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/livesettings"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// On the real API server, with the install's RBAC: a controller that
// follows fleet-role-settings (through its own token's list and watch) takes
// a valid change at its next decision and says its source in the status; a
// change that does not validate, one that sets a restart-only key and the
// ConfigMap's key removed are each refused, named in the status with why,
// and the settings in force stay; a version that holds them again clears
// the refusal.
func TestSettingsFollowedLive(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.15.1"})
	startProbe(t, c, s, "server-1", &testkit.Sampler{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cms := c.Admin.CoreV1().ConfigMaps(s.Namespace)
	// put writes the settings file and returns the resourceVersion it made.
	put := func(file *string) string {
		t.Helper()
		cm, err := cms.Get(ctx, "fleet-role-settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case file == nil:
			delete(cm.Data, settings.ConfigMapKey)
		case cm.Data == nil:
			cm.Data = map[string]string{settings.ConfigMapKey: *file}
		default:
			cm.Data[settings.ConfigMapKey] = *file
		}
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion
	}
	fileOf := func(s settings.Settings) *string {
		t.Helper()
		b, err := s.MarshalJSON() // JSON is YAML: the file's keys and syntax
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		return &text
	}
	// The ConfigMap first holds the settings the controller starts on.
	rv := put(fileOf(s))

	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
	r := startReplica(t, c, s, e, "a", false, nil)
	cl := c.Client(t, testkit.ControllerSA)
	watch := cl.NewSettingsInformer(s.Namespace, "fleet-role-settings")
	testkit.Go(t, "settings informer", watch.Run)
	f := &livesettings.Follower{Watch: watch, ConfigMap: s.Namespace + "/fleet-role-settings",
		Load: func(data []byte) (settings.Settings, error) {
			next, err := settings.Parse(data, settings.Defaults())
			if err == nil {
				err = next.Validate()
			}
			return next, err
		},
		Apply: r.ctrl.SetSettings, Log: slog.New(slog.DiscardHandler), Metrics: livesettings.NewMetrics(r.metrics.Registry)}
	f.Start(s)
	testkit.Go(t, "settings follower", f.Run)

	// published waits for a status whose settings pass check.
	published := func(what string, check func(status.Settings) error) {
		t.Helper()
		start := time.Now()
		testkit.Eventually(t, time.Minute, func() error {
			st, err := c.Status(t)
			if err != nil {
				return err
			}
			if st.Settings.Source == nil {
				return fmt.Errorf("the status names no source of its settings")
			}
			return check(st.Settings)
		})
		t.Logf("%s: in the status %.2f s after the write", what, time.Since(start).Seconds())
	}
	inForce := func(window int, rv string) func(status.Settings) error {
		return func(got status.Settings) error {
			if got.Values.Window != window || got.Source.ResourceVersion != rv || got.Source.Refused != nil {
				return fmt.Errorf("settings window %d at resourceVersion %q, refused %+v; want window %d at %q, none refused",
					got.Values.Window, got.Source.ResourceVersion, got.Source.Refused, window, rv)
			}
			if got.Source.ConfigMap != s.Namespace+"/fleet-role-settings" {
				return fmt.Errorf("source %q", got.Source.ConfigMap)
			}
			return nil
		}
	}
	refused := func(window int, rv string, result settings.SourceResult) func(status.Settings) error {
		return func(got status.Settings) error {
			ref := got.Source.Refused
			if ref == nil || ref.Result != result || ref.ResourceVersion != rv || ref.Message == "" {
				return fmt.Errorf("refused %+v, want %s of resourceVersion %q with why", ref, result, rv)
			}
			if got.Values.Window != window {
				return fmt.Errorf("window %d in force, want %d kept", got.Values.Window, window)
			}
			return nil
		}
	}
	published("the settings it started on", inForce(s.Window, rv))

	// A valid change: a longer window and a higher percentile, both live.
	next := s
	next.Window, next.TailPercentile = 40, 0.975
	rv = put(fileOf(next))
	published("a longer window and a higher percentile", func(got status.Settings) error {
		if err := inForce(40, rv)(got); err != nil {
			return err
		}
		if got.Values.TailPercentile != 0.975 {
			return fmt.Errorf("tail_percentile %v, want 0.975", got.Values.TailPercentile)
		}
		return nil
	})

	// A longer period: the decisions come DecisionsPerPeriod a new period
	// (a ticker never fires early, so the count over a span is at most the
	// span's ticks and the one in flight, however busy the machine).
	slow := next
	slow.SamplePeriod = time.Second
	rv = put(fileOf(slow))
	published("a period of 1s", func(got status.Settings) error {
		if err := inForce(40, rv)(got); err != nil {
			return err
		}
		if got.Values.SamplePeriod != time.Second {
			return fmt.Errorf("sample_period %v, want 1s", got.Values.SamplePeriod)
		}
		return nil
	})
	from, start := decisions(t, r.metrics), time.Now()
	testkit.Eventually(t, time.Minute, func() error {
		if d := decisions(t, r.metrics) - from; d < 4 {
			return fmt.Errorf("%v decisions since the new period, want 4", d)
		}
		return nil
	})
	span, n := time.Since(start), decisions(t, r.metrics)-from
	if most := float64(controller.DecisionsPerPeriod)*span.Seconds()/slow.SamplePeriod.Seconds() + 1; n > most {
		t.Errorf("%v decisions in %v after the period became 1s, more than the %.1f its ticker allows: the old period of %v still ticks", n, span, most, s.SamplePeriod)
	}
	if pg, ok := r.page.Page(); !ok || pg.Refresh != time.Second {
		t.Errorf("the status page refreshes every %v (page %v), want the new period, 1s", pg.Refresh, ok)
	}
	next = slow

	// Refused, each in turn, the window of 40 kept.
	bad := "window: 40\ntail_percentile: 1.5\n"
	published("a percentile of 1.5", refused(40, put(&bad), settings.SourceInvalid))
	moved := next
	moved.Namespace = "elsewhere"
	published("a move to another namespace", refused(40, put(fileOf(moved)), settings.SourceRestartOnly))
	published("the settings file removed", refused(40, put(nil), settings.SourceAbsent))

	// Back as in force: the refusal is cleared.
	rv = put(fileOf(next))
	published("the settings in force again", inForce(40, rv))
	if err := readyErr(r.ctrl); err != nil {
		t.Errorf("the controller is not ready: %v", err)
	}

	// The probe follows the same ConfigMap with its own token, which RBAC
	// lets list and watch that ConfigMap by name alone.
	pw := c.ProbeClient(t, "server-1").NewSettingsInformer(s.Namespace, "fleet-role-settings")
	testkit.Go(t, "probe's settings informer", pw.Run)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := pw.WaitForSync(wctx); err != nil {
		t.Fatalf("the probe's token cannot follow the settings: %v", err)
	}
	if v, ok := pw.Current(); !ok || v.Absent || v.ResourceVersion != rv {
		t.Errorf("the probe's watch holds %+v (synced %v), want resourceVersion %s", v, ok, rv)
	}
}

// decisions is fleet_role_decisions_total summed over its results.
func decisions(t *testing.T, m *controller.Metrics) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() == "fleet_role_decisions_total" {
			for _, x := range f.GetMetric() {
				n += x.GetCounter().GetValue()
			}
		}
	}
	return n
}

// On the real API server: the page's history rides with the status, so
// that the replica that takes the Lease over starts its page from the
// decisions its predecessor published, with their times, and goes on from
// them.
func TestHistorySurvivesAFailover(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.16.1"})
	startProbe(t, c, s, "server-1", &testkit.Sampler{})
	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}
	a := startReplica(t, c, s, e, "a", true, nil)
	// A status written by a with a full history (the replicas' pages hold
	// four decisions).
	var first time.Time
	testkit.Eventually(t, time.Minute, func() error {
		st, err := c.Status(t)
		if err != nil {
			return err
		}
		if st.Writer == nil || st.Writer.Identity != "a" || st.History == nil || len(st.History.TimesMS) < 4 {
			return fmt.Errorf("no status by a with four decisions of history yet")
		}
		first = st.History.DecodeTimes()[0]
		return nil
	})
	a.loop.Stop(t) // gives the Lease up
	b := startReplica(t, c, s, e, "b", true, nil)
	testkit.Eventually(t, time.Minute, func() error {
		pg, ok := b.page.Page()
		if !ok {
			return fmt.Errorf("b has decided nothing yet")
		}
		oldest, newest := pg.History.Span()
		if pg.History.Len() < 2 || !oldest.Before(newest) || oldest.Before(first) {
			return fmt.Errorf("b's page remembers %d decisions from %v to %v", pg.History.Len(), oldest, newest)
		}
		if pg.Model == nil {
			return fmt.Errorf("no model")
		}
		st, err := c.Status(t)
		if err != nil || st.Writer == nil || st.Writer.Identity != "b" {
			return fmt.Errorf("no status by b yet (%v)", err)
		}
		// a's decisions come first on b's page: the oldest predates b's.
		if !oldest.Before(st.Writer.Since) {
			return fmt.Errorf("b's page's oldest decision %v is b's own (it leads since %v): a's history was not taken", oldest, st.Writer.Since)
		}
		return nil
	})
}
