package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// gates are the conditions under which no change is made, however fit the
// plan.
func gates(j *limits, voters, learners []*host, mem Memory) []Reason {
	s, now := j.s, j.now
	var out []Reason
	const reportedBasis = "a voter whose probe has not reported may be paused or cut off while its last sample still looks healthy: no change on stale readings"
	n := len(out)
	for _, v := range voters {
		if v.verdict == Unknown {
			r := step(GateReported, v.node.Name, reportedBasis, false, "")
			out = append(out, quoting(r, v.node.Name+" is unknown, its probe has not reported a full, fresh, readable window: ", firstUnknown(j, v)))
		}
	}
	if len(out) == n {
		out = append(out, step(GateReported, "", reportedBasis, true, "every voter's probe has reported a full, fresh window"))
	}

	const leaderBasis = "etcd without a leader cannot take a membership change"
	n = len(out)
	for _, v := range voters {
		if x := v.etcd; x != nil && !x.hasLeader {
			out = append(out, step(GateLeader, v.node.Name, leaderBasis, false, fmt.Sprintf("%s's etcd reports no leader", v.node.Name)))
		}
	}
	if len(out) == n {
		out = append(out, step(GateLeader, "", leaderBasis, true, "every voter's etcd that reported has a leader"))
	}

	const learnerBasis = "one membership change at a time: a learner is still being promoted or removed by k3s (learnerMaxStallTime)"
	if len(learners) > 0 {
		for _, l := range learners {
			out = append(out, step(GateLearner, l.node.Name, learnerBasis, false, fmt.Sprintf("%s is an etcd learner", l.node.Name)))
		}
	} else {
		out = append(out, step(GateLearner, "", learnerBasis, true, "no learner"))
	}

	const connBasis = "a voter not connected to every other voter: removing another could cost the quorum"
	peers := len(voters) - 1
	n = len(out)
	for _, v := range voters {
		x := v.etcd
		if x == nil || x.connectedPeers >= peers {
			continue
		}
		r := step(GateConnected, v.node.Name, connBasis, false,
			fmt.Sprintf("%s's etcd is connected to %d of the %d other voters", v.node.Name, x.connectedPeers, peers))
		r.Value, r.Limit, r.Unit, r.Rule = num(float64(x.connectedPeers)), num(float64(peers)), "peers", settings.AtLeast
		out = append(out, r)
	}
	if len(out) == n {
		out = append(out, step(GateConnected, "", connBasis, true, fmt.Sprintf("every voter that reported is connected to the %d others", peers)))
	}

	const membersBasis = "a swap adds one member and then removes one, so it starts from target_voters members"
	count := len(voters) + len(learners)
	var views []string
	for _, v := range voters {
		if x := v.etcd; x != nil && x.knownPeers+1 != s.TargetVoters {
			views = append(views, fmt.Sprintf("%s's etcd knows %d members", v.node.Name, x.knownPeers+1))
		}
	}
	r := step(GateMembers, "", membersBasis, count == s.TargetVoters && len(views) == 0,
		fmt.Sprintf("%d etcd members (voters %d, learners %d), target_voters %d", count, len(voters), len(learners), s.TargetVoters))
	if len(views) > 0 {
		r.Detail += "; " + strings.Join(views, "; ")
	}
	r.Value, r.Limit, r.Unit = num(float64(count)), num(float64(s.TargetVoters)), "members"
	out = append(out, r)

	l := s.Cooldown()
	since := now.Sub(mem.VotersChangedAt)
	// Its value and detail state an age: the fingerprint compares when the
	// set changed (in the memory) and whether the cooldown has run.
	head := "the voter set (" + strings.Join(mem.Voters, ", ") + ") last changed "
	age := since.Round(time.Millisecond).String() + " ago, "
	c := against(l, GateCooldown, "", since.Seconds(), head+age+"at "+mem.VotersChangedAt.Format(time.RFC3339)+"; cooldown "+l.Duration().String())
	c.age = spanOf(len(head), age)
	out = append(out, c)
	return out
}
