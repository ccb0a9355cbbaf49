package settings_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// A followed ConfigMap's file is read as the file was at start: the
// environment and the flags given still win over it, and the result is
// validated.
func TestLoadFileKeepsPrecedence(t *testing.T) {
	env := map[string]string{"FLEET_ROLE_TARGET_VOTERS": "3"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	flags := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := settings.AddFlags(flags)
	if err := flags.Parse([]string{"--window=400"}); err != nil {
		t.Fatal(err)
	}
	s, err := fl.LoadFile([]byte("window: 200\ntarget_voters: 5\nmax_servers: 7\ntail_percentile: 0.95\n"), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if s.Window != 400 || s.TargetVoters != 3 || s.MaxServers != 7 || s.TailPercentile != 0.95 {
		t.Errorf("loaded window %d, target_voters %d, max_servers %d, tail_percentile %v; want 400 (the flag), 3 (the environment), 7 and 0.95 (the file)",
			s.Window, s.TargetVoters, s.MaxServers, s.TailPercentile)
	}
	// Refused as at start: a key that is no setting, a value that does not
	// validate.
	for data, want := range map[string]string{
		"windw: 10\n":            "windw",
		"tail_percentile: 1.5\n": "tail_percentile",
	} {
		if _, err := fl.LoadFile([]byte(data), lookup); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile(%q) = %v, want an error naming %s", data, err, want)
		}
	}
}

// A live change is taken whole or not at all: one that sets a restart-only
// key is refused, naming every such key with why; one that sets only live
// keys lists them; no change lists none.
func TestLiveChange(t *testing.T) {
	old := settings.Defaults()

	next := old
	next.Window = old.Window + 10
	next.SamplePeriod = old.SamplePeriod + time.Second
	keys, err := settings.LiveChange(old, next)
	if err != nil || !slices.Equal(keys, []string{"window", "sample_period"}) {
		t.Errorf("live keys: %v, %v; want [window sample_period] and no error", keys, err)
	}

	if keys, err := settings.LiveChange(old, old); err != nil || len(keys) != 0 {
		t.Errorf("no change: %v, %v", keys, err)
	}

	next.Namespace = "elsewhere"
	next.Acting = settings.ActingPlan
	keys, err = settings.LiveChange(old, next)
	var lce *settings.LiveChangeError
	if !errors.As(err, &lce) || !slices.Equal(lce.Keys, []string{"namespace", "acting"}) || len(keys) != 4 {
		t.Fatalf("restart-only change: keys %v, %v; want a LiveChangeError naming namespace and acting", keys, err)
	}
	for _, k := range lce.Keys {
		why, ok := settings.RestartOnly(k)
		if !ok || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: the error %q does not say why (%q)", k, err, why)
		}
	}
	// Every restart-only key is a setting, and none of the limits' is.
	for _, k := range []string{"namespace", "status_configmap", "eligible_label", "pinned_label", "dry_run", "acting", "fsync_skip_reason"} {
		if _, ok := settings.RestartOnly(k); !ok {
			t.Errorf("%s applies live", k)
		}
	}
	for _, k := range []string{"election_timeout", "heartbeat_interval", "tail_percentile", "window", "sample_period", "target_voters", "max_servers", "storage_quota_bytes", "learner_stall_time", "peer_port"} {
		if why, ok := settings.RestartOnly(k); ok {
			t.Errorf("%s applies only at a restart (%s)", k, why)
		}
	}
}
