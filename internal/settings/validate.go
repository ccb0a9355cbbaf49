package settings

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Facts the validation rests on (FACTS.md).
const (
	// etcd refuses an election timeout under 5 x the heartbeat interval.
	minHeartbeatsPerElection = 5
	// etcd: the election timeout may not exceed 50 s.
	maxElectionTimeout = 50 * time.Second
	// etcd: no more than 7 members.
	maxMembers = 7
	// etcd: odd member counts; three is the fewest that survive a loss.
	minVoters = 3
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
	} else if min := minHeartbeatsPerElection * s.HeartbeatInterval; s.ElectionTimeout < min {
		bad("election_timeout", fmt.Sprintf("must be at least %d heartbeat intervals (%d x %v = %v): etcd refuses a shorter one",
			minHeartbeatsPerElection, minHeartbeatsPerElection, s.HeartbeatInterval, min))
	}
	if s.ElectionTimeout > maxElectionTimeout {
		bad("election_timeout", fmt.Sprintf("must be at most %v: etcd refuses a longer one", maxElectionTimeout))
	}

	pOK := s.TailPercentile > 0 && s.TailPercentile < 1 && !math.IsNaN(s.TailPercentile)
	if !pOK {
		bad("tail_percentile", "must be between 0 and 1, both excluded")
	}
	if s.Window < 1 {
		bad("window", "must be at least 1")
	} else if pOK && s.Window < s.MinWindow() {
		bad("window", fmt.Sprintf("must be at least %d, the fewest samples that give the p%s a sample of its own (window >= 1/(1-tail_percentile))",
			s.MinWindow(), PercentileName(s.TailPercentile)))
	}
	if s.SamplePeriod <= 0 {
		bad("sample_period", "must be positive")
	}

	if s.TargetVoters%2 == 0 {
		bad("target_voters", "must be odd: etcd's quorum gains nothing from an even member")
	}
	if s.TargetVoters < minVoters {
		bad("target_voters", fmt.Sprintf("must be at least %d: the fewest voters that survive the loss of one", minVoters))
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
	}
	if s.LearnerStallTime < 0 {
		bad("learner_stall_time", "must not be negative")
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
	}
	if msgs := validation.IsDNS1123Subdomain(s.StatusConfigMap); len(msgs) > 0 {
		bad("status_configmap", "must be a valid ConfigMap name: "+strings.Join(msgs, "; "))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid settings: %w", errors.Join(errs...))
}

// quote shows empty and spaced values unambiguously.
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
