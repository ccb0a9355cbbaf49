package settings_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleet-role/fleet-role/internal/settings"
)

func TestDefaultsAreValidAndK3s(t *testing.T) {
	s := settings.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.ElectionTimeout != 5*time.Second || s.HeartbeatInterval != 500*time.Millisecond || s.LearnerStallTime != 5*time.Minute {
		t.Fatalf("not k3s's timing: %+v", s)
	}
	if !s.DryRun {
		t.Fatal("dry_run defaults off")
	}
	for _, k := range settings.Keys() {
		if settings.DefaultBasis(k) == "" {
			t.Errorf("%s has no basis for its default", k)
		}
	}
	// The window is exactly the fewest that give the p99 a sample of its own.
	if s.Window != s.MinWindow() {
		t.Fatalf("window %d, min %d", s.Window, s.MinWindow())
	}
}

func TestDerivedLimits(t *testing.T) {
	s := settings.Defaults()
	for _, c := range []struct {
		l     settings.Limit
		value float64
		rule  settings.Rule
	}{
		{s.RTTLimit(), 0.5, settings.AtMost},
		{s.ConnectLimit(), 0.25, settings.AtMost},
		{s.WALFsyncLimit(), 0.01, settings.Under},
		{s.BackendCommitLimit(), 0.025, settings.Under},
		{s.FdatasyncLimit(), 0.01, settings.Under},
		{s.StallLimit(), 0.5, settings.Under},
		{s.WakeupLimit(), 0.5, settings.Under},
		{s.MemoryLimit(2<<30, false), 2 << 30, settings.AtLeast},
		{s.StaleAfter(), 45, settings.AtMost},
		{s.Cooldown(), 1800, settings.AtLeast},
		{s.WindowLimit(), 100, settings.AtLeast},
	} {
		if c.l.Value != c.value || c.l.Rule != c.rule || c.l.Basis == "" {
			t.Errorf("%s = %v %s, want %v %s (basis %q)", c.l.Name, c.l.Value, c.l.Rule, c.value, c.rule, c.l.Basis)
		}
	}
	s.ElectionTimeout, s.HeartbeatInterval = time.Second, 100*time.Millisecond
	if s.RTTLimit().Value != 0.1 || s.ConnectLimit().Value != 0.05 || s.StallLimit().Value != 0.1 || s.WakeupLimit().Value != 0.1 {
		t.Fatalf("etcd's timing: rtt %v connect %v stall %v wakeup %v", s.RTTLimit().Value, s.ConnectLimit().Value, s.StallLimit().Value, s.WakeupLimit().Value)
	}
	if len(s.Limits()) != 11 {
		t.Fatalf("%d limits", len(s.Limits()))
	}
}

func TestMinWindow(t *testing.T) {
	for p, want := range map[float64]int{0.99: 100, 0.9: 10, 0.95: 20, 0.98: 50, 0.999: 1000, 0.5: 2, 0.995: 200, 0.9999: 10000} {
		s := settings.Defaults()
		s.TailPercentile = p
		if got := s.MinWindow(); got != want {
			t.Errorf("MinWindow(p=%v) = %d, want %d", p, got, want)
		}
	}
}

// Each rule's error names the setting, its value and the rule.
func TestValidationMessages(t *testing.T) {
	for _, c := range []struct {
		set  func(s *settings.Settings)
		want string
	}{
		{func(s *settings.Settings) { s.TargetVoters = 4; s.MaxServers = 7 }, "target_voters = 4: must be odd: etcd's quorum gains nothing from an even member"},
		{func(s *settings.Settings) { s.TargetVoters = 1 }, "target_voters = 1: must be at least 3: the fewest voters that survive the loss of one"},
		{func(s *settings.Settings) { s.TargetVoters = 5 }, "target_voters = 5 with max_servers = 5: must leave room for one learner (target_voters + 1 <= max_servers), since a swap adds the new member before removing the old"},
		{func(s *settings.Settings) { s.MaxServers = 9 }, "max_servers = 9: must be at most 7: etcd allows no more members"},
		{func(s *settings.Settings) { s.ElectionTimeout = 2499 * time.Millisecond }, "election_timeout = 2.499s: must be at least 5 heartbeat intervals (5 x 500ms = 2.5s): etcd refuses a shorter one"},
		{func(s *settings.Settings) { s.ElectionTimeout = 50*time.Second + time.Millisecond }, "election_timeout = 50.001s: must be at most 50s: etcd refuses a longer one"},
		{func(s *settings.Settings) { s.HeartbeatInterval = 0 }, "heartbeat_interval = 0s: must be positive"},
		{func(s *settings.Settings) { s.TailPercentile = 1 }, "tail_percentile = 1: must be between 0 and 1, both excluded"},
		{func(s *settings.Settings) { s.TailPercentile = 0 }, "tail_percentile = 0: must be between 0 and 1, both excluded"},
		{func(s *settings.Settings) { s.Window = 99 }, "window = 99: must be at least 100, the fewest samples that give the p99 a sample of its own (window >= 1/(1-tail_percentile))"},
		{func(s *settings.Settings) { s.TailPercentile = 0.9; s.Window = 9 }, "window = 9: must be at least 10, the fewest samples that give the p90 a sample of its own (window >= 1/(1-tail_percentile))"},
		{func(s *settings.Settings) { s.Window = 0 }, "window = 0: must be at least 1"},
		{func(s *settings.Settings) { s.SamplePeriod = 0 }, "sample_period = 0s: must be positive"},
		{func(s *settings.Settings) { s.StorageQuotaBytes = 0 }, "storage_quota_bytes = 0: must be positive"},
		{func(s *settings.Settings) { s.LearnerStallTime = -time.Second }, "learner_stall_time = -1s: must not be negative"},
		{func(s *settings.Settings) { s.PeerPort = 70000 }, "peer_port = 70000: must be a TCP port, 1 to 65535"},
		{func(s *settings.Settings) { s.EligibleLabel = "bad label" }, `eligible_label = "bad label": must be a valid Kubernetes label key: name part must consist of alphanumeric characters`},
		{func(s *settings.Settings) { s.PinnedLabel = s.EligibleLabel }, "pinned_label = fleet-role.io/voter-eligible: must differ from eligible_label"},
		{func(s *settings.Settings) { s.Namespace = "Platform" }, "namespace = Platform: must be a valid namespace name: a lowercase RFC 1123 label"},
		{func(s *settings.Settings) { s.StatusConfigMap = "" }, `status_configmap = "": must be a valid ConfigMap name: `},
		{func(s *settings.Settings) { s.Acting = "" }, `acting = "": must be one of off, plan, guided or auto`},
		{func(s *settings.Settings) { s.Acting = "Plan" }, `acting = Plan: must be one of off, plan, guided or auto`},
		{func(s *settings.Settings) { s.Acting = "false" }, `acting = false: must be one of off, plan, guided or auto (YAML reads an unquoted off or on as a boolean: write acting: "off")`},
		{func(s *settings.Settings) { s.DryRun = false }, "dry_run = false with acting = off: nothing is carried out unless acting is guided or auto"},
		{func(s *settings.Settings) { s.Acting, s.DryRun = settings.ActingPlan, false }, "dry_run = false with acting = plan"},
		{func(s *settings.Settings) { s.Acting = settings.ActingGuided }, "acting = guided with dry_run = true: carrying out a swap needs both"},
		{func(s *settings.Settings) { s.Acting = settings.ActingAuto }, "acting = auto with dry_run = true"},
	} {
		s := settings.Defaults()
		c.set(&s)
		err := s.Validate()
		if err == nil {
			t.Errorf("no error, want %q", c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error:\n%v\nwant it to contain:\n%s", err, c.want)
		}
	}
	// Every violation is returned, not just the first.
	s := settings.Defaults()
	s.TargetVoters, s.Window, s.PeerPort = 4, 10, 0
	err := s.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, k := range []string{"target_voters = 4", "window = 10", "peer_port = 0"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("joined error lacks %q:\n%v", k, err)
		}
	}
}

func TestParse(t *testing.T) {
	s, err := settings.Parse([]byte("election_timeout: 1000ms\nheartbeat_interval: 100ms\nwindow: 200\ntail_percentile: 0.995\ndry_run: true\nfsync_skip_reason: etcd data on tmpfs in this scenario\n"), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if s.ElectionTimeout != time.Second || s.Window != 200 || s.TailPercentile != 0.995 || s.FsyncSkipReason != "etcd data on tmpfs in this scenario" {
		t.Fatalf("parsed %+v", s)
	}
	js, err := settings.Parse([]byte(`{"election_timeout":"1s","window":200}`), settings.Defaults())
	if err != nil || js.ElectionTimeout != time.Second || js.Window != 200 {
		t.Fatalf("JSON: %+v %v", js, err)
	}
	if s, err := settings.Parse(nil, settings.Defaults()); err != nil || !reflect.DeepEqual(s, settings.Defaults()) {
		t.Fatalf("an empty file changed the settings: %v", err)
	}
	for in, want := range map[string]string{
		"election_timout: 5s":     "election_timout: unknown setting",
		"election_timeout: 5":     `election_timeout = "5": want a Go duration such as 5s or 500ms`,
		"window: 100.5":           `window = "100.5": want a whole number`,
		"window: [1, 2]":          "window: want a single value, not a list or mapping",
		"dry_run: maybe":          `dry_run = "maybe": want true or false`,
		"window: null":            "window: no value",
		"- a\n- b":                "want a mapping of setting names to values",
		"storage_quota_bytes: -1": `storage_quota_bytes = "-1": want a whole number of bytes`,
	} {
		_, err := settings.Parse([]byte(in), settings.Defaults())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// Defaults < file < environment < flags, and only flags that were given.
func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "settings.yaml")
	if err := os.WriteFile(file, []byte("election_timeout: 10s\nheartbeat_interval: 1s\nwindow: 200\ntarget_voters: 5\nmax_servers: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FLEET_ROLE_WINDOW": "300", "FLEET_ROLE_TARGET_VOTERS": "3", "FLEET_ROLE_SETTINGS_FILE": file}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	flags := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := settings.AddFlags(flags)
	if err := flags.Parse([]string{"--window=400", "--dry-run"}); err != nil {
		t.Fatal(err)
	}
	s, err := fl.Load(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if s.ElectionTimeout != 10*time.Second || s.TargetVoters != 3 || s.MaxServers != 7 || s.Window != 400 || !s.DryRun {
		t.Fatalf("loaded %+v", s)
	}
	if s.HeartbeatInterval != time.Second || s.PeerPort != 2380 {
		t.Fatalf("file or default lost: %+v", s)
	}

	// A malformed flag is refused when parsed.
	flags = pflag.NewFlagSet("t", pflag.ContinueOnError)
	flags.SetOutput(new(strings.Builder))
	settings.AddFlags(flags)
	if err := flags.Parse([]string{"--election-timeout=5"}); err == nil || !strings.Contains(err.Error(), "want a Go duration") {
		t.Fatalf("bad flag: %v", err)
	}

	// An unreadable file is a *fs.PathError; an invalid result is not.
	flags = pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl = settings.AddFlags(flags)
	if err := flags.Parse([]string{"--settings", filepath.Join(dir, "missing.yaml")}); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Load(func(string) (string, bool) { return "", false }); !errors.As(err, new(*fs.PathError)) {
		t.Fatalf("missing file: %v", err)
	}
	bad := func(k string) (string, bool) {
		if k == "FLEET_ROLE_TARGET_VOTERS" {
			return "4", true
		}
		return "", false
	}
	_, err = settings.AddFlags(pflag.NewFlagSet("t", pflag.ContinueOnError)).Load(bad)
	if err == nil || errors.As(err, new(*fs.PathError)) || !strings.Contains(err.Error(), "target_voters = 4: must be odd") {
		t.Fatalf("invalid env: %v", err)
	}
	if _, err := settings.FromEnv(settings.Defaults(), func(k string) (string, bool) { return "x", k == "FLEET_ROLE_WINDOW" }); err == nil ||
		!strings.Contains(err.Error(), "FLEET_ROLE_WINDOW") {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	s := settings.Defaults()
	s.ElectionTimeout, s.FsyncSkipReason, s.TailPercentile = 1500*time.Millisecond, `on "tmpfs"`, 0.995
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"election_timeout":"1.5s"`) {
		t.Fatalf("durations are not Go durations: %s", b)
	}
	var back settings.Settings
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: %+v != %+v", back, s)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{2 << 30: "2 GiB", 1536 << 20: "1536 MiB", 1000: "1000 bytes", 8 << 30: "8 GiB"} {
		if got := settings.FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParse: any file either fails with an error or gives settings that
// survive a round trip through the status's JSON.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "election_timeout: 5s\n", `{"window": 100, "tail_percentile": 0.99}`, "window: 1e3", "dry_run: yes",
		"eligible_label: fleet-role.io/voter-eligible\npinned_label: x/y\n", "learner_stall_time: -5m", "- 1", "a: [b]",
		"tail_percentile: NaN", "storage_quota_bytes: 18446744073709551615", "peer_port: \"2380\"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := settings.Parse(data, settings.Defaults())
		if err != nil {
			return
		}
		_ = s.Validate()
		b, err := json.Marshal(s)
		if err != nil {
			return // NaN or an infinity has no JSON form
		}
		back, err := settings.Parse(b, settings.Defaults())
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip of %q: %+v != %+v", data, back, s)
		}
	})
}

// Every bound at, just inside and just outside it: at and inside are valid,
// outside is refused with the setting, the value and the rule.
func TestBounds(t *testing.T) {
	type S = settings.Settings
	const gib = uint64(1 << 30)
	long := func(n int) string { return strings.Repeat("a", n) }
	label := func(prefix, name int) string { return long(prefix) + "/" + long(name) }
	for _, c := range []struct {
		name string
		set  func(s *S)
		want string // "" means valid
	}{
		{"election_timeout at 50s", func(s *S) { s.ElectionTimeout = 50 * time.Second }, ""},
		{"election_timeout under 50s", func(s *S) { s.ElectionTimeout = 50*time.Second - time.Millisecond }, ""},
		{"election_timeout over 50s", func(s *S) { s.ElectionTimeout = 50*time.Second + time.Nanosecond }, "election_timeout = 50.000000001s: must be at most 50s: etcd refuses a longer one"},

		{"heartbeat_interval at election_timeout/5", func(s *S) { s.HeartbeatInterval = time.Second }, ""},
		{"heartbeat_interval under election_timeout/5", func(s *S) { s.HeartbeatInterval = time.Second - time.Nanosecond }, ""},
		{"heartbeat_interval over election_timeout/5", func(s *S) { s.HeartbeatInterval = time.Second + time.Nanosecond }, "election_timeout = 5s: must be at least 5 heartbeat intervals (5 x 1.000000001s = 5.000000005s): etcd refuses a shorter one"},
		{"heartbeat_interval at 1ms", func(s *S) { s.HeartbeatInterval = time.Millisecond }, ""},
		{"heartbeat_interval over 1ms", func(s *S) { s.HeartbeatInterval = time.Millisecond + time.Nanosecond }, ""},
		{"heartbeat_interval under 1ms", func(s *S) { s.HeartbeatInterval = time.Millisecond - time.Nanosecond }, "heartbeat_interval = 999.999µs: must be at least 1ms: etcd takes it in whole milliseconds"},

		{"tail_percentile at 0.5", func(s *S) { s.TailPercentile = 0.5 }, ""},
		{"tail_percentile over 0.5", func(s *S) { s.TailPercentile = 0.5001 }, ""},
		{"tail_percentile under 0.5", func(s *S) { s.TailPercentile = 0.4999 }, "tail_percentile = 0.4999: must be at least 0.5: a percentile below the median judges the typical value, not the tail"},
		{"tail_percentile needing MaxWindow", func(s *S) { s.TailPercentile, s.Window = 0.99975, settings.MaxWindow }, ""},
		{"tail_percentile needing under MaxWindow", func(s *S) { s.TailPercentile, s.Window = 0.9997, settings.MaxWindow }, ""},
		{"tail_percentile needing over MaxWindow", func(s *S) { s.TailPercentile, s.Window = 0.99976, settings.MaxWindow },
			"tail_percentile = 0.99976: must need no more than the most samples a window may hold (4000): the p99.976 needs 4167 (window >= 1/(1-tail_percentile))"},

		{"window at MaxWindow", func(s *S) { s.Window = settings.MaxWindow }, ""},
		{"window under MaxWindow", func(s *S) { s.Window = settings.MaxWindow - 1 }, ""},
		{"window over MaxWindow", func(s *S) { s.Window = settings.MaxWindow + 1 }, "window = 4001: must be at most 4000: the most samples whose worst-case entry"},
		{"window of a trillion", func(s *S) { s.Window = 1_000_000_000_000 }, "window = 1000000000000: must be at most 4000"},

		{"sample_period at 1ms", func(s *S) { s.SamplePeriod = time.Millisecond }, ""},
		{"sample_period over 1ms", func(s *S) { s.SamplePeriod = time.Millisecond + time.Nanosecond }, ""},
		{"sample_period under 1ms", func(s *S) { s.SamplePeriod = time.Millisecond - time.Nanosecond }, "sample_period = 999.999µs: must be at least 1ms: the entry stamps samples to the millisecond"},
		{"sample_period of 1ns", func(s *S) { s.SamplePeriod = time.Nanosecond }, "sample_period = 1ns: must be at least 1ms"},
		{"sample_period at 5m", func(s *S) { s.SamplePeriod = 5 * time.Minute }, ""},
		{"sample_period under 5m", func(s *S) { s.SamplePeriod = 5*time.Minute - time.Nanosecond }, ""},
		{"sample_period over 5m", func(s *S) { s.SamplePeriod = 5*time.Minute + time.Nanosecond }, "sample_period = 5m0.000000001s: must be at most 5m0s, k3s's learnerMaxStallTime"},

		{"target_voters at 7", func(s *S) { s.TargetVoters, s.MaxServers = 7, 7 }, "target_voters = 7 with max_servers = 7: must leave room for one learner"},
		{"target_voters under 7", func(s *S) { s.TargetVoters, s.MaxServers = 5, 7 }, ""},
		{"target_voters over 7", func(s *S) { s.TargetVoters, s.MaxServers = 8, 7 }, "target_voters = 8: must be at most 7: etcd allows no more members"},
		{"max_servers at 7", func(s *S) { s.MaxServers = 7 }, ""},
		{"max_servers under 7", func(s *S) { s.MaxServers = 6 }, ""},
		{"max_servers over 7", func(s *S) { s.MaxServers = 8 }, "max_servers = 8: must be at most 7: etcd allows no more members"},

		{"storage_quota_bytes at 8 GiB", func(s *S) { s.StorageQuotaBytes = 8 * gib }, ""},
		{"storage_quota_bytes under 8 GiB", func(s *S) { s.StorageQuotaBytes = 8*gib - 1 }, ""},
		{"storage_quota_bytes over 8 GiB", func(s *S) { s.StorageQuotaBytes = 8*gib + 1 }, "storage_quota_bytes = 8589934593: must be at most 8589934592 (8 GiB): etcd warns of a larger quota"},
		{"storage_quota_bytes at 1", func(s *S) { s.StorageQuotaBytes = 1 }, ""},

		{"learner_stall_time at 5m", func(s *S) { s.LearnerStallTime = 5 * time.Minute }, ""},
		{"learner_stall_time under 5m", func(s *S) { s.LearnerStallTime = 5*time.Minute - time.Nanosecond }, ""},
		{"learner_stall_time over 5m", func(s *S) { s.LearnerStallTime = 5*time.Minute + time.Nanosecond }, "learner_stall_time = 5m0.000000001s: must be at most 5m0s, k3s's learnerMaxStallTime"},
		{"learner_stall_time at 0", func(s *S) { s.LearnerStallTime = 0 }, ""},

		{"peer_port at 1", func(s *S) { s.PeerPort = 1 }, ""},
		{"peer_port under 1", func(s *S) { s.PeerPort = 0 }, "peer_port = 0: must be a TCP port, 1 to 65535"},
		{"peer_port at 65535", func(s *S) { s.PeerPort = 65535 }, ""},
		{"peer_port over 65535", func(s *S) { s.PeerPort = 65536 }, "peer_port = 65536: must be a TCP port, 1 to 65535"},

		{"label name at 63", func(s *S) { s.EligibleLabel = label(10, 63) }, ""},
		{"label name over 63", func(s *S) { s.EligibleLabel = label(10, 64) }, "eligible_label = " + strconv.Quote(label(10, 64)[:64]) + "... (75 bytes): must be a valid Kubernetes label key: name part must be no more than 63 bytes"},
		{"label prefix at 253", func(s *S) { s.PinnedLabel = label(253, 1) }, ""},
		{"label prefix over 253", func(s *S) { s.PinnedLabel = label(254, 1) }, "pinned_label = " + strconv.Quote(long(64)) + "... (256 bytes): must be a valid Kubernetes label key: prefix part must be no more than 253 bytes"},
		// The records' namespace, NAMESPACE-records, is a label too: 63
		// characters at most leaves 55 for the namespace.
		{"namespace at 55", func(s *S) { s.Namespace = long(55) }, ""},
		{"namespace at 56", func(s *S) { s.Namespace = long(56) }, "namespace = " + long(56) + ": must leave room for the records' namespace " + long(56) + "-records (64 characters): must be no more than 63 characters"},
		{"namespace over 63", func(s *S) { s.Namespace = long(64) }, "namespace = " + long(64) + ": must be a valid namespace name: must be no more than 63 characters"},
		{"configmap at 253", func(s *S) { s.StatusConfigMap = long(253) }, ""},
		{"configmap over 253", func(s *S) { s.StatusConfigMap = long(254) }, "status_configmap = " + strconv.Quote(long(64)) + "... (254 bytes): must be a valid ConfigMap name: must be no more than 253 characters"},

		{"fsync_skip_reason at 1024 bytes", func(s *S) { s.FsyncSkipReason = long(settings.MaxTextBytes) }, ""},
		{"fsync_skip_reason under 1024 bytes", func(s *S) { s.FsyncSkipReason = long(settings.MaxTextBytes - 1) }, ""},
		{"fsync_skip_reason over 1024 bytes", func(s *S) { s.FsyncSkipReason = long(settings.MaxTextBytes + 1) },
			"fsync_skip_reason = " + strconv.Quote(long(64)) + "... (1025 bytes): must be at most 1024 bytes: every host's entry repeats it"},
		{"fsync_skip_reason not UTF-8", func(s *S) { s.FsyncSkipReason = "tmpfs \xff" }, `fsync_skip_reason = "tmpfs \xff": must be UTF-8 text`},
		{"fsync_skip_reason with a newline", func(s *S) { s.FsyncSkipReason = "on tmpfs\nhere" }, ""},
	} {
		s := settings.Defaults()
		c.set(&s)
		err := s.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error\n%v\nwant it to contain\n%s", c.name, err, c.want)
		}
	}
}

// A key given twice is refused, in YAML and in JSON, naming the key and its
// line, rather than the last one silently winning.
func TestParseRefusesDuplicateKeys(t *testing.T) {
	for in, want := range map[string]string{
		"window: 100\nsample_period: 15s\nwindow: 200\n":          `line 3: key "window" already set in map`,
		`{"window": 100, "window": 1000000000000}`:                `line 1: key "window" already set in map`,
		"{\n  \"dry_run\": true,\n  \"dry_run\": false\n}":        `line 3: key "dry_run" already set in map`,
		"election_timeout: 5s\n\"election_timeout\": 50s\n":       `line 2: key "election_timeout" already set in map`,
		"namespace: a\n? namespace\n: b\n":                        `key "namespace" already set in map`,
		"window: 100\nWindow: 200\n":                              "Window: unknown setting",
		"eligible_label: a/b\npinned_label: c/d\nwindow: 100\n\n": "",
	} {
		_, err := settings.Parse([]byte(in), settings.Defaults())
		switch {
		case want == "" && err != nil:
			t.Errorf("Parse(%q) = %v, want no error", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Parse(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// A settings file is a ConfigMap key: at most 1 MiB is read.
func TestParseFileSize(t *testing.T) {
	pad := func(n int) []byte {
		b := []byte("window: 100\n")
		return append(b, strings.Repeat("#", n-len(b))...)
	}
	if _, err := settings.Parse(pad(settings.MaxFileBytes), settings.Defaults()); err != nil {
		t.Errorf("a file of exactly %d bytes: %v", settings.MaxFileBytes, err)
	}
	if _, err := settings.Parse(pad(settings.MaxFileBytes-1), settings.Defaults()); err != nil {
		t.Errorf("a file of %d bytes: %v", settings.MaxFileBytes-1, err)
	}
	_, err := settings.Parse(pad(settings.MaxFileBytes+1), settings.Defaults())
	if err == nil || !strings.Contains(err.Error(), "1048577 bytes, more than the 1048576 a ConfigMap holds") {
		t.Errorf("a file of %d bytes: %v", settings.MaxFileBytes+1, err)
	}
	path := filepath.Join(t.TempDir(), "settings.yaml")
	if err := os.WriteFile(path, pad(4*settings.MaxFileBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := settings.ReadFile(path, settings.Defaults()); err == nil || !strings.Contains(err.Error(), "1048577 bytes, more than the 1048576") {
		t.Errorf("ReadFile of a 4 MiB file read %v, want it refused after 1 MiB and one byte", err)
	}
}

// TestActingModes: each mode validates with the dry_run it goes with, and
// the status records acting only when it is not off, so that a status of a
// fleet that does not act is byte for byte what it was before acting.
func TestActingModes(t *testing.T) {
	for _, c := range []struct {
		mode   string
		dryRun bool
		acts   bool
	}{{settings.ActingOff, true, false}, {settings.ActingPlan, true, false}, {settings.ActingGuided, false, true}, {settings.ActingAuto, false, true}} {
		s := settings.Defaults()
		s.Acting, s.DryRun = c.mode, c.dryRun
		if err := s.Validate(); err != nil {
			t.Errorf("acting %s, dry_run %v: %v", c.mode, c.dryRun, err)
		}
		if s.Acts() != c.acts {
			t.Errorf("acting %s: Acts %v, want %v", c.mode, s.Acts(), c.acts)
		}
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"acting"`); has != (c.mode != settings.ActingOff) {
			t.Errorf("acting %s: marshalled %s", c.mode, b)
		}
		var back settings.Settings
		if err := back.UnmarshalJSON(b); err != nil || back.Acting != c.mode {
			t.Errorf("acting %s: read back %q, %v", c.mode, back.Acting, err)
		}
	}
}

// TestActingUnquotedOff: YAML 1.1 reads an unquoted off as false; the file
// that says so is refused with the quoting that works, and the shipped
// settings' quoted "off" reads as off.
func TestActingUnquotedOff(t *testing.T) {
	s, err := settings.Parse([]byte("acting: \"off\"\n"), settings.Defaults())
	if err == nil {
		err = s.Validate()
	}
	if err != nil || s.Acting != settings.ActingOff {
		t.Fatalf(`acting: "off" read as %q, %v`, s.Acting, err)
	}
	s, err = settings.Parse([]byte("acting: off\n"), settings.Defaults())
	if err == nil {
		err = s.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `write acting: "off"`) {
		t.Errorf("unquoted off: %v", err)
	}
}
