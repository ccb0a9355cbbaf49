package settings

import (
	"fmt"
	"strings"
	"time"
)

// restartOnly names the settings a running component takes only at a
// restart, and why: each is bound into what the component built at start,
// or is a power an edit of a ConfigMap alone must not grant.
var restartOnly = map[string]string{
	"namespace":         "the records, the status, the Lease and the watches live in it (the records in NAMESPACE-records)",
	"status_configmap":  "the election and every status write are bound to its name",
	"eligible_label":    "the Node watches keep of each Node only the labels named at start",
	"pinned_label":      "the Node watches keep of each Node only the labels named at start",
	"dry_run":           "whether fleet-role may change the cluster is decided at start, by whoever restarts it, never by an edit of a ConfigMap",
	"acting":            "whether fleet-role may change the cluster is decided at start, by whoever restarts it, never by an edit of a ConfigMap",
	"fsync_skip_reason": "the probe sets its disk reading up at start",
}

// RestartOnly says whether key applies only at a restart, and why.
func RestartOnly(key string) (why string, ok bool) {
	why, ok = restartOnly[key]
	return why, ok
}

// Changed lists the keys whose values differ between old and new, in the
// order of the settings file.
func Changed(old, new Settings) []string {
	var keys []string
	for _, f := range fields {
		if f.format(old) != f.format(new) {
			keys = append(keys, f.key)
		}
	}
	return keys
}

// LiveChangeError is a change of the settings a running component refuses:
// it changes settings that apply only at a restart. The settings in force
// stay, whole: a change is taken all or nothing.
type LiveChangeError struct {
	Keys []string // the restart-only keys it changes, in file order
}

func (e *LiveChangeError) Error() string {
	var parts []string
	for _, k := range e.Keys {
		parts = append(parts, fmt.Sprintf("%s (%s)", k, restartOnly[k]))
	}
	return fmt.Sprintf("the change sets %s, which apply only at a restart: the settings in force stay, whole; restart both components to take it (kubectl -n <namespace> rollout restart deployment/fleet-role daemonset/fleet-role-probe)",
		strings.Join(parts, "; "))
}

// LiveChange judges new, valid settings against those in force, old: the
// keys it changes, and a *LiveChangeError when any of them applies only at
// a restart.
func LiveChange(old, new Settings) ([]string, error) {
	keys := Changed(old, new)
	var fixed []string
	for _, k := range keys {
		if _, ok := restartOnly[k]; ok {
			fixed = append(fixed, k)
		}
	}
	if len(fixed) > 0 {
		return keys, &LiveChangeError{Keys: fixed}
	}
	return keys, nil
}

// Version is one version of the settings ConfigMap as the API server served
// it: its settings file and resourceVersion, or that it is absent (deleted,
// or without the ConfigMapKey).
type Version struct {
	Data            []byte
	ResourceVersion string
	Absent          bool
}

// SourceResult is what became of a version of the settings ConfigMap: a
// stable code.
type SourceResult string

const (
	// SourceApplied: valid, and it changes only settings that apply live;
	// taken at the component's next period boundary.
	SourceApplied SourceResult = "Applied"
	// SourceUnchanged: the same settings as in force (another field of the
	// ConfigMap changed, or a change was undone).
	SourceUnchanged SourceResult = "Unchanged"
	// SourceInvalid: refused; it does not parse or validate, as it would be
	// refused at start.
	SourceInvalid SourceResult = "Invalid"
	// SourceRestartOnly: refused; valid, but it changes a setting that
	// applies only at a restart (RestartOnly).
	SourceRestartOnly SourceResult = "RestartOnly"
	// SourceAbsent: refused; the ConfigMap, or its settings file, is gone.
	// A running component keeps the settings in force; a restarted one
	// would not start on them.
	SourceAbsent SourceResult = "Absent"
)

// Source is what a running component says of where its settings come from:
// the ConfigMap it follows, the resourceVersion of the latest version it
// took (applied, or holding the settings in force already; "" before its
// watch's first list), and, while a later version is refused, why.
type Source struct {
	ConfigMap       string   `json:"configmap"`
	ResourceVersion string   `json:"resource_version,omitempty"`
	Refused         *Refusal `json:"refused,omitempty"`
}

// Refusal is the latest version of the settings ConfigMap that was refused.
type Refusal struct {
	ResourceVersion string       `json:"resource_version,omitempty"`
	Result          SourceResult `json:"result"`
	Message         string       `json:"message"`
	At              time.Time    `json:"at"`
}
