// Package settings holds fleet-role's one settings type, shared by the probe,
// the controller and `fleet-role decide`, and the limits derived from it.
//
// Settings are read from, in rising precedence: the defaults (k3s's own
// figures, each with its basis), a settings file (YAML or JSON, the same
// snake_case keys the fleet-role-settings ConfigMap holds under
// settings.yaml), FLEET_ROLE_* environment variables, and flags. The probe
// and the controller mount the same file, so neither holds a default of its
// own that could differ from the other's.
package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Settings is every figure fleet-role's decision rests on.
type Settings struct {
	ElectionTimeout   time.Duration
	HeartbeatInterval time.Duration
	TailPercentile    float64
	Window            int
	SamplePeriod      time.Duration
	TargetVoters      int
	MaxServers        int
	StorageQuotaBytes uint64
	LearnerStallTime  time.Duration
	PeerPort          int
	EligibleLabel     string
	PinnedLabel       string
	Namespace         string
	StatusConfigMap   string
	// DryRun must be true for the controller; the controller checks it.
	DryRun bool
	// Acting is what the controller does with the swap it names
	// (ActingOff, ActingPlan, ActingGuided, ActingAuto; docs/acting.md).
	Acting string
	// FsyncSkipReason, when not empty, tells the probe not to take the disk
	// reading and why (for example "etcd data on tmpfs in this scenario");
	// the status reports it per host.
	FsyncSkipReason string
}

// Modes of the acting setting: what the controller does with the swap it
// names (docs/acting.md).
const (
	// ActingOff reports and changes nothing: the status is what it was
	// before acting existed, byte for byte.
	ActingOff = "off"
	// ActingPlan adds the published swap's steps, with their guards, to the
	// status, and writes nothing else.
	ActingPlan = "plan"
	// ActingGuided carries out a swap once an operator approves its plan ID.
	ActingGuided = "guided"
	// ActingAuto approves a swap itself once it has been published steadily
	// for a window and every guard holds.
	ActingAuto = "auto"
)

// Acts reports whether the settings let the controller change the cluster.
func (s Settings) Acts() bool { return s.Acting == ActingGuided || s.Acting == ActingAuto }

// field describes one setting: its key in the file (the environment variable
// and flag names derive from it), its help, the basis of its default, and a
// pointer into a Settings value.
type field struct {
	key   string
	help  string
	basis string
	ptr   func(*Settings) any
	// omitDefault leaves the setting out of the JSON a status records
	// while it holds its default, so that a setting added later does not
	// change a status that does not use it (the status stays byte for
	// byte what it was before the setting was added).
	omitDefault bool
}

// fields lists every setting once, in the order the file, the flags and the
// status show them.
var fields = []field{
	{"election_timeout", "etcd election timeout of the cluster (Go duration)",
		"k3s pkg/etcd sets --election-timeout=5000 (etcd's own default is 1000 ms)",
		func(s *Settings) any { return &s.ElectionTimeout }, false},
	{"heartbeat_interval", "etcd heartbeat interval of the cluster (Go duration)",
		"k3s pkg/etcd sets --heartbeat-interval=500 (etcd's own default is 100 ms)",
		func(s *Settings) any { return &s.HeartbeatInterval }, false},
	{"tail_percentile", "percentile every tail limit is judged at (0 < p < 1)",
		"p99, the percentile etcd's FAQ states its disk limits at",
		func(s *Settings) any { return &s.TailPercentile }, false},
	{"window", "samples per host the verdict is judged over (at least 1/(1-tail_percentile), at most 4000)",
		"100: the fewest samples that give a p99 a sample of its own (window >= 1/(1-p))",
		func(s *Settings) any { return &s.Window }, false},
	{"sample_period", "time between two samples of the probe (Go duration, 1ms to 5m)",
		"15s: etcd feeds its peer round-trip histogram about twice every 30 s, so each sample gains about one round-trip observation per peer",
		func(s *Settings) any { return &s.SamplePeriod }, false},
	{"target_voters", "number of etcd voters the cluster should have (odd, 3 to 5 with room for a learner)",
		"3: the smallest odd voter count that survives the loss of one voter",
		func(s *Settings) any { return &s.TargetVoters }, false},
	{"max_servers", "most servers (voters plus a learner) the cluster may hold (at most 7)",
		"5: room for one learner above the target of 3, under etcd's limit of 7 members",
		func(s *Settings) any { return &s.MaxServers }, false},
	{"storage_quota_bytes", "etcd storage quota used when etcd reports none (bytes, at most 8 GiB)",
		"etcd --quota-backend-bytes default, 2 GiB",
		func(s *Settings) any { return &s.StorageQuotaBytes }, false},
	{"learner_stall_time", "time k3s lets a learner stall before removing it (Go duration, at most 5m)",
		"k3s learnerMaxStallTime, 5 minutes",
		func(s *Settings) any { return &s.LearnerStallTime }, false},
	{"peer_port", "etcd peer port the probe connects to on every voter",
		"k3s embedded etcd listens for peers on 2380",
		func(s *Settings) any { return &s.PeerPort }, false},
	{"eligible_label", "node label key whose value true marks a host eligible to vote",
		"fleet-role's own label, written true or false because a kubelet never removes a label",
		func(s *Settings) any { return &s.EligibleLabel }, false},
	{"pinned_label", "node label key whose value true pins a voter (never swapped out)",
		"fleet-role's own label, written true or false because a kubelet never removes a label",
		func(s *Settings) any { return &s.PinnedLabel }, false},
	{"namespace", "namespace of fleet-role's ConfigMaps: the status and the settings; the probes' records are in NAMESPACE-records",
		"fleet-role's own namespace, which holds only fleet-role; its records' namespace holds only the records",
		func(s *Settings) any { return &s.Namespace }, false},
	{"status_configmap", "ConfigMap the controller publishes status.json in",
		"fleet-role's own ConfigMap name",
		func(s *Settings) any { return &s.StatusConfigMap }, false},
	{"dry_run", "report only; the controller refuses to run without it",
		"dry-run is the only mode fleet-role has",
		func(s *Settings) any { return &s.DryRun }, false},
	{"acting", "what the controller does with the swap it names: off, plan (the status carries the swap's steps), guided (carried out once an operator approves it) or auto",
		"off: fleet-role reports and changes nothing; acting is the operator's choice (docs/acting.md)",
		func(s *Settings) any { return &s.Acting }, true},
	{"fsync_skip_reason", "when set, the probe takes no disk reading and reports this reason",
		"empty: the probe takes the disk reading",
		func(s *Settings) any { return &s.FsyncSkipReason }, false},
}

// Defaults returns k3s's figures; fields lists the basis of each.
func Defaults() Settings {
	return Settings{
		ElectionTimeout:   5 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		TailPercentile:    0.99,
		Window:            100,
		SamplePeriod:      15 * time.Second,
		TargetVoters:      3,
		MaxServers:        5,
		StorageQuotaBytes: 2 << 30,
		LearnerStallTime:  5 * time.Minute,
		PeerPort:          2380,
		EligibleLabel:     "fleet-role.io/voter-eligible",
		PinnedLabel:       "fleet-role.io/voter-pinned",
		Namespace:         "fleet-role",
		StatusConfigMap:   "fleet-role-status",
		DryRun:            true,
		Acting:            ActingOff,
	}
}

// RecordsSuffix names the records' namespace after fleet-role's own.
const RecordsSuffix = "-records"

// RecordsNamespace is the namespace of the probes' records, and of nothing
// else: namespace with RecordsSuffix. The probes may write any ConfigMap
// there (RBAC cannot narrow a create by name; the admission policy narrows
// them to their own record) and only read, by name, in Namespace, so that
// no probe credential can touch the status or the settings even with the
// admission policy off (docs/security.md). Derived rather than a setting of
// its own, so that the two can never be the same namespace.
func (s Settings) RecordsNamespace() string { return s.Namespace + RecordsSuffix }

// Keys returns every setting's key in order.
func Keys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// DefaultBasis returns why key's default is what it is, or "" for an
// unknown key.
func DefaultBasis(key string) string {
	for _, f := range fields {
		if f.key == key {
			return f.basis
		}
	}
	return ""
}

func lookup(key string) (field, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

// set parses text as the value of f into s. The syntax is the same for the
// file, the environment and the flags.
func (f field) set(s *Settings, text string) error {
	switch p := f.ptr(s).(type) {
	case *time.Duration:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("%s = %q: want a Go duration such as 5s or 500ms", f.key, text)
		}
		*p = d
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("%s = %q: want a whole number", f.key, text)
		}
		*p = n
	case *uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return fmt.Errorf("%s = %q: want a whole number of bytes", f.key, text)
		}
		*p = n
	case *float64:
		v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return fmt.Errorf("%s = %q: want a number", f.key, text)
		}
		*p = v
	case *bool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("%s = %q: want true or false", f.key, text)
		}
		*p = b
	case *string:
		*p = text
	default:
		panic(fmt.Sprintf("settings: field %s has no parser", f.key))
	}
	return nil
}

// format renders the value of f in s as set accepts it.
func (f field) format(s Settings) string {
	switch p := f.ptr(&s).(type) {
	case *time.Duration:
		return p.String()
	case *int:
		return strconv.Itoa(*p)
	case *uint64:
		return strconv.FormatUint(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	}
	panic(fmt.Sprintf("settings: field %s has no formatter", f.key))
}

// Get returns the value of the setting key as text, and false for an
// unknown key.
func (s Settings) Get(key string) (string, bool) {
	f, ok := lookup(key)
	if !ok {
		return "", false
	}
	return f.format(s), true
}

// Set parses text as the value of the setting key, with the syntax of the
// environment and the flags.
func (s *Settings) Set(key, text string) error {
	f, ok := lookup(key)
	if !ok {
		return fmt.Errorf("unknown setting %q", key)
	}
	return f.set(s, text)
}
