package livesettings

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// applied is what a Follower handed over, in order.
type applied struct {
	s   settings.Settings
	src settings.Source
}

func follower(t *testing.T, start settings.Settings) (*Follower, *[]applied, *Metrics) {
	t.Helper()
	var got []applied
	m := NewMetrics(prometheus.NewRegistry())
	f := &Follower{
		ConfigMap: "fleet-role/fleet-role-settings",
		Load:      func(data []byte) (settings.Settings, error) { return settingsOf(data) },
		Apply:     func(s settings.Settings, src settings.Source) { got = append(got, applied{s, src}) },
		Log:       slog.New(slog.DiscardHandler),
		Metrics:   m,
		Clock:     clocktesting.NewFakePassiveClock(time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)),
	}
	f.Start(start)
	return f, &got, m
}

// settingsOf reads data over the defaults and validates, as a component
// with no environment or flags does.
func settingsOf(data []byte) (settings.Settings, error) {
	s, err := settings.Parse(data, settings.Defaults())
	if err != nil {
		return s, err
	}
	return s, s.Validate()
}

// Each version of the ConfigMap, judged: the first list of what the
// component started on, a valid live change, an invalid one, one that sets
// a restart-only key, the ConfigMap gone, then back as it was: the settings
// handed over change only with the valid change, and the state says each
// refusal until a version holds the settings in force again.
func TestFollowerJudgesEachVersion(t *testing.T) {
	start := settings.Defaults()
	f, got, m := follower(t, start)
	steps := []struct {
		v          settings.Version
		want       settings.SourceResult
		window     int    // of the settings handed over
		refusedBy  string // the refusal's message names it; "" for none
		refusedGot settings.SourceResult
	}{
		{settings.Version{Data: []byte("# the shipped file\n"), ResourceVersion: "1"}, Unchanged, start.Window, "", ""},
		{settings.Version{Data: []byte("window: 120\n"), ResourceVersion: "2"}, Applied, 120, "", ""},
		{settings.Version{Data: []byte("window: 120\ntail_percentile: 1\n"), ResourceVersion: "3"}, Invalid, 120, "tail_percentile", Invalid},
		{settings.Version{Data: []byte("window: 120\nnamespace: elsewhere\n"), ResourceVersion: "4"}, RestartOnly, 120, "namespace", RestartOnly},
		{settings.Version{Absent: true}, Absent, 120, "gone", Absent},
		{settings.Version{Data: []byte("window: 120\n"), ResourceVersion: "6"}, Unchanged, 120, "", ""},
	}
	for i, st := range steps {
		if r := f.Observe(st.v); r != st.want {
			t.Fatalf("step %d (resourceVersion %q): %s, want %s", i, st.v.ResourceVersion, r, st.want)
		}
		if len(*got) != i+1 {
			t.Fatalf("step %d: %d hand-overs, want one a version", i, len(*got))
		}
		last := (*got)[i]
		if last.s.Window != st.window {
			t.Errorf("step %d: window %d handed over, want %d", i, last.s.Window, st.window)
		}
		switch r := last.src.Refused; {
		case st.refusedBy == "" && r != nil:
			t.Errorf("step %d: refused %+v, want none", i, r)
		case st.refusedBy != "" && (r == nil || r.Result != st.refusedGot || !strings.Contains(r.Message, st.refusedBy) || r.ResourceVersion != st.v.ResourceVersion):
			t.Errorf("step %d: refused %+v, want %s naming %q at resourceVersion %q", i, r, st.refusedGot, st.refusedBy, st.v.ResourceVersion)
		}
		if wantGauge := map[bool]float64{true: 1, false: 0}[st.refusedBy != ""]; value(t, m.refused) != wantGauge {
			t.Errorf("step %d: fleet_role_settings_refused %v, want %v", i, value(t, m.refused), wantGauge)
		}
	}
	// The source names the version the settings in force are held by.
	if src := (*got)[len(*got)-1].src; src.ConfigMap != "fleet-role/fleet-role-settings" || src.ResourceVersion != "6" {
		t.Errorf("source %+v, want fleet-role/fleet-role-settings at resourceVersion 6", src)
	}
	for r, want := range map[settings.SourceResult]float64{Applied: 1, Unchanged: 2, Invalid: 1, RestartOnly: 1, Absent: 1} {
		if c := value(t, m.changes.WithLabelValues(string(r))); c != want {
			t.Errorf("fleet_role_settings_changes_total{result=%q} = %v, want %v", r, c, want)
		}
	}
	// A version judged already is not judged again (an informer may
	// deliver it twice): nothing is handed over.
	n := len(*got)
	if r := f.Observe(settings.Version{Data: []byte("window: 120\n"), ResourceVersion: "6"}); r != Unchanged || len(*got) != n {
		t.Errorf("the same version again: %s and %d hand-overs, want Unchanged and none", r, len(*got)-n)
	}
}

// fakeWatch is a Watch whose versions the test sets.
type fakeWatch struct {
	changed chan struct{}
	v       chan settings.Version
	cur     settings.Version
}

func (w *fakeWatch) Changed() <-chan struct{}          { return w.changed }
func (w *fakeWatch) Current() (settings.Version, bool) { return w.cur, true }

// Run judges the version current at each signal.
func TestFollowerRunFollowsTheWatch(t *testing.T) {
	f, _, _ := follower(t, settings.Defaults())
	w := &fakeWatch{changed: make(chan struct{})}
	f.Watch = w
	handed := make(chan applied, 1)
	f.Apply = func(s settings.Settings, src settings.Source) { handed <- applied{s, src} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	w.cur = settings.Version{Data: []byte("window: 150\n"), ResourceVersion: "7"}
	w.changed <- struct{}{}
	select {
	case a := <-handed:
		if a.s.Window != 150 || a.src.ResourceVersion != "7" {
			t.Errorf("handed %d at %q (%+v), want window 150 at 7", a.s.Window, a.src.ResourceVersion, a.src.Refused)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing handed over within a minute of the signal")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// value is a gauge's or a counter's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}
