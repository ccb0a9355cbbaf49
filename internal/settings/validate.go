package settings

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Facts the validation rests on (docs/facts.md).
const (
	// etcd refuses an election timeout under 5 x the heartbeat interval.
	minHeartbeatsPerElection = 5
	// etcd: the election timeout may not exceed 50 s.
	maxElectionTimeout = 50 * time.Second
	// etcd: no more than 7 members.
	maxMembers = 7
	// etcd: odd member counts; three is the fewest that survive a loss.
	minVoters = 3
	// etcd's --heartbeat-interval and --election-timeout are whole
	// milliseconds (k3s sets 500 and 5000): nothing shorter can be set.
	minHeartbeat = time.Millisecond
	// etcd warns of a storage quota above 8 GiB.
	maxStorageQuota = 8 << 30
	// k3s's learnerMaxStallTime, 5 minutes: the time k3s gives a learner.
	k3sLearnerMaxStallTime = 5 * time.Minute
)

// Bounds fleet-role derives (docs/limits.md, "Settings validation").
const (
	// MaxWindow is the most samples a window may hold: the largest round
	// figure whose worst realistic entry, a voter's in a cluster of 7
	// members (etcd's most), fits its record, one 1 MiB ConfigMap, with
	// room to spare. internal/entry's worst-case window (TestWindowFitsBudget's
	// values: six-digit connects, stalls and wake-up lateness, failing
	// readings, six peers' round trips) encodes to 219 bytes a sample, so
	// 4,000 samples take 875,640 bytes of the 1,048,576, leaving a sixth
	// spare; 4,789 would be the most that fit (TestMaxWindowFitsAConfigMap).
	MaxWindow = 4000
	// MinSamplePeriod is the shortest sample period: the entry stamps
	// samples to the millisecond (dt_ms, docs/entry.md), so samples closer
	// together could not be told apart, and the readings' timeout
	// (ReadingTimeout, half a period at most) would be under a millisecond.
	MinSamplePeriod = time.Millisecond
	// MaxSamplePeriod is the longest: k3s's learnerMaxStallTime. A learner
	// that k3s adds is promoted or removed within it, so with a longer
	// period one could come and go between two samples, and the "no
	// learner" gate would rest on samples older than a learner's life.
	MaxSamplePeriod = k3sLearnerMaxStallTime
	// MaxTextBytes bounds fsync_skip_reason: every recording host's entry
	// carries it as fsync.skipped, which the entry holds to one text's
	// bound, entry.MaxTextBytes (a line for people, capped as a Kubernetes
	// Event's note is); a longer reason would be cut in every record.
	MaxTextBytes = 1024
	// minTailPercentile is the median: a percentile below it judges the
	// typical value, not the tail.
	minTailPercentile = 0.5
)

// Validate checks every rule and returns every violation joined, each naming
// the setting, its value and the rule.
func (s Settings) Validate() error {
	var errs []error
	bad := func(key, rule string) {
		v, _ := s.Get(key)
		errs = append(errs, fmt.Errorf("%s = %s: %s", key, quote(v), rule))
	}

	if s.HeartbeatInterval <= 0 {
		bad("heartbeat_interval", "must be positive")
	} else if s.HeartbeatInterval < minHeartbeat {
		bad("heartbeat_interval", fmt.Sprintf("must be at least %v: etcd takes it in whole milliseconds", minHeartbeat))
	} else if min := minHeartbeatsPerElection * s.HeartbeatInterval; s.ElectionTimeout < min {
		bad("election_timeout", fmt.Sprintf("must be at least %d heartbeat intervals (%d x %v = %v): etcd refuses a shorter one",
			minHeartbeatsPerElection, minHeartbeatsPerElection, s.HeartbeatInterval, min))
	}
	if s.ElectionTimeout > maxElectionTimeout {
		bad("election_timeout", fmt.Sprintf("must be at most %v: etcd refuses a longer one", maxElectionTimeout))
	}

	pOK := s.TailPercentile > 0 && s.TailPercentile < 1 && !math.IsNaN(s.TailPercentile)
	switch {
	case !pOK:
		bad("tail_percentile", "must be between 0 and 1, both excluded")
	case s.TailPercentile < minTailPercentile:
		bad("tail_percentile", fmt.Sprintf("must be at least %g: a percentile below the median judges the typical value, not the tail", minTailPercentile))
	case s.MinWindow() > MaxWindow:
		bad("tail_percentile", fmt.Sprintf("must need no more than the most samples a window may hold (%d): the p%s needs %d (window >= 1/(1-tail_percentile))",
			MaxWindow, PercentileName(s.TailPercentile), s.MinWindow()))
		pOK = false // the window is then refused for the percentile, not on its own
	}
	switch {
	case s.Window < 1:
		bad("window", "must be at least 1")
	case s.Window > MaxWindow:
		bad("window", fmt.Sprintf("must be at most %d: the most samples whose worst-case entry (a voter's among 7 members, about 219 bytes a sample) fits a 1 MiB ConfigMap", MaxWindow))
	case pOK && s.Window < s.MinWindow():
		bad("window", fmt.Sprintf("must be at least %d, the fewest samples that give the p%s a sample of its own (window >= 1/(1-tail_percentile))",
			s.MinWindow(), PercentileName(s.TailPercentile)))
	}
	switch {
	case s.SamplePeriod <= 0:
		bad("sample_period", "must be positive")
	case s.SamplePeriod < MinSamplePeriod:
		bad("sample_period", fmt.Sprintf("must be at least %v: the entry stamps samples to the millisecond", MinSamplePeriod))
	case s.SamplePeriod > MaxSamplePeriod:
		bad("sample_period", fmt.Sprintf("must be at most %v, k3s's learnerMaxStallTime: a learner could otherwise come and go between two samples", MaxSamplePeriod))
	}

	if s.TargetVoters%2 == 0 {
		bad("target_voters", "must be odd: etcd's quorum gains nothing from an even member")
	}
	if s.TargetVoters < minVoters {
		bad("target_voters", fmt.Sprintf("must be at least %d: the fewest voters that survive the loss of one", minVoters))
	}
	if s.TargetVoters > maxMembers {
		bad("target_voters", fmt.Sprintf("must be at most %d: etcd allows no more members", maxMembers))
	}
	if s.MaxServers > maxMembers {
		bad("max_servers", fmt.Sprintf("must be at most %d: etcd allows no more members", maxMembers))
	}
	if s.TargetVoters+1 > s.MaxServers {
		errs = append(errs, fmt.Errorf("target_voters = %d with max_servers = %d: must leave room for one learner (target_voters + 1 <= max_servers), since a swap adds the new member before removing the old",
			s.TargetVoters, s.MaxServers))
	}

	if s.StorageQuotaBytes == 0 {
		bad("storage_quota_bytes", "must be positive")
	} else if s.StorageQuotaBytes > maxStorageQuota {
		bad("storage_quota_bytes", fmt.Sprintf("must be at most %d (%s): etcd warns of a larger quota", uint64(maxStorageQuota), FormatBytes(maxStorageQuota)))
	}
	if s.LearnerStallTime < 0 {
		bad("learner_stall_time", "must not be negative")
	} else if s.LearnerStallTime > k3sLearnerMaxStallTime {
		bad("learner_stall_time", fmt.Sprintf("must be at most %v, k3s's learnerMaxStallTime, the figure it stands for (tests set it lower to shorten the cooldown)", k3sLearnerMaxStallTime))
	}
	if s.PeerPort < 1 || s.PeerPort > 65535 {
		bad("peer_port", "must be a TCP port, 1 to 65535")
	}

	for _, l := range []struct{ key, value string }{{"eligible_label", s.EligibleLabel}, {"pinned_label", s.PinnedLabel}} {
		if msgs := validation.IsQualifiedName(l.value); len(msgs) > 0 {
			bad(l.key, "must be a valid Kubernetes label key: "+strings.Join(msgs, "; "))
		}
	}
	if s.EligibleLabel == s.PinnedLabel {
		bad("pinned_label", "must differ from eligible_label")
	}
	if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
		bad("namespace", "must be a valid namespace name: "+strings.Join(msgs, "; "))
	} else if msgs := validation.IsDNS1123Label(s.RecordsNamespace()); len(msgs) > 0 {
		bad("namespace", fmt.Sprintf("must leave room for the records' namespace %s (%d characters): %s", s.RecordsNamespace(), len(s.RecordsNamespace()), strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(s.StatusConfigMap); len(msgs) > 0 {
		bad("status_configmap", "must be a valid ConfigMap name: "+strings.Join(msgs, "; "))
	}
	switch s.Acting {
	case ActingOff, ActingPlan:
		if !s.DryRun {
			errs = append(errs, fmt.Errorf("dry_run = false with acting = %s: nothing is carried out unless acting is %s or %s, so dry_run must stay true", s.Acting, ActingGuided, ActingAuto))
		}
	case ActingGuided, ActingAuto:
		if s.DryRun {
			errs = append(errs, fmt.Errorf("acting = %s with dry_run = true: carrying out a swap needs both, acting = %s and dry_run = false, so that one setting edited alone never starts it", s.Acting, s.Acting))
		}
	default:
		why := fmt.Sprintf("must be one of %s, %s, %s or %s", ActingOff, ActingPlan, ActingGuided, ActingAuto)
		if s.Acting == "false" || s.Acting == "true" {
			// YAML 1.1, which sigs.k8s.io/yaml reads, takes an unquoted
			// off, no, on or yes for a boolean.
			why += ` (YAML reads an unquoted off or on as a boolean: write acting: "off")`
		}
		bad("acting", why)
	}
	switch {
	case len(s.FsyncSkipReason) > MaxTextBytes:
		bad("fsync_skip_reason", fmt.Sprintf("must be at most %d bytes: every host's entry repeats it", MaxTextBytes))
	case !utf8.ValidString(s.FsyncSkipReason):
		bad("fsync_skip_reason", "must be UTF-8 text")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid settings: %w", errors.Join(errs...))
}

// quotedBytes is as much of a value as an error repeats: a value too long
// for its setting is named by its start and its length.
const quotedBytes = 64

// quote shows empty, spaced and long values unambiguously.
func quote(v string) string {
	if len(v) > quotedBytes {
		return fmt.Sprintf("%q... (%d bytes)", v[:quotedBytes], len(v))
	}
	// Spaces, quotes, control characters and bytes that are not UTF-8.
	if q := strconv.Quote(v); v == "" || strings.ContainsAny(v, " \"") || q[1:len(q)-1] != v {
		return q
	}
	return v
}
