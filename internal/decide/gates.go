package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// gates are the conditions under which no change is made, however fit the
// plan.
//
// leaving is the voter a swap published at the previous decision removes
// (the voter set unchanged since), or "". Two gates read that voter
// differently: its record gone unwritten (gate_reported) and its connects
// alone reading it cut off (gate_connected) do not withdraw the swap that
// removes it. What they guard against is a voter that may be broken while
// it looks healthy, whose loss beside another's removal would cost the
// quorum, and a partition's failed connects taken for a slow path before
// etcd itself shows it; the voter leaving looked unfit, and it leaves. A
// path lossy enough to be that voter's fault delays its record's writes
// and fails its connects in runs, and would withdraw the swap it earned
// (the fault campaign's lossy voters, at 26% and 38% loss). etcd's own
// report of that voter without a leader or a peer still holds: a
// membership change needs a leader.
func gates(j *limits, voters, learners []*host, links *linkMatrix, mem status.Memory, leaving string) []status.Reason {
	s, now := j.s, j.now
	var out []status.Reason
	const reportedBasis = "a voter whose probe has not reported may be paused or cut off while its last sample still looks healthy: no change on stale readings"
	n := len(out)
	var kept *status.Reason
	for _, v := range voters {
		if v.verdict != status.Unknown {
			continue
		}
		if v.node.Name == leaving {
			r := quoting(step(status.CodeLeavingVoterUnreported, v.node.Name, reportedBasis, true, ""), v.node.Name+
				" is the voter the swap published at the previous decision removes: not held for, though it is unknown, its probe has not reported a full, fresh, readable window: ", firstUnknown(j, v))
			kept = &r
			continue
		}
		r := step(status.CodeVoterUnreported, v.node.Name, reportedBasis, false, "")
		out = append(out, quoting(r, v.node.Name+" is unknown, its probe has not reported a full, fresh, readable window: ", firstUnknown(j, v)))
	}
	switch {
	case len(out) > n:
	case kept != nil:
		out = append(out, *kept)
	default:
		out = append(out, step(status.CodeAllReported, "", reportedBasis, true, "every voter's probe has reported a full, fresh window"))
	}

	const leaderBasis = "etcd without a leader cannot take a membership change, and a window with samples taken while a voter had none measured an election or a partition, not the paths: it is not judged for a swap until they roll out"
	n = len(out)
	for _, v := range voters {
		x := v.etcd
		switch {
		case x == nil:
		case !x.hasLeader:
			out = append(out, step(status.CodeNoLeader, v.node.Name, leaderBasis, false, fmt.Sprintf("%s's etcd reports no leader", v.node.Name)))
		case x.leaderless > 0:
			r := step(status.CodeLeaderlessInWindow, v.node.Name, leaderBasis, false, fmt.Sprintf("%s's etcd reported no leader in %d of its window's %d samples, the latest taken at %s: held until they roll out of the window",
				v.node.Name, x.leaderless, x.windowSize, x.leaderlessAt.UTC().Format(time.RFC3339)))
			r.Value, r.Limit, r.Unit, r.Rule = num(float64(x.leaderless)), num(0), "samples", settings.AtMost
			out = append(out, r)
		}
	}
	if len(out) == n {
		out = append(out, step(status.CodeLeaderThroughout, "", leaderBasis, true, "every voter's etcd that reported has had a leader at every sample of its window"))
	}

	const learnerBasis = "one membership change at a time: a learner is still being promoted or removed by k3s (learnerMaxStallTime)"
	if len(learners) > 0 {
		for _, l := range learners {
			out = append(out, step(status.CodeLearnerPresent, l.node.Name, learnerBasis, false, fmt.Sprintf("%s is an etcd learner", l.node.Name)))
		}
	} else {
		out = append(out, step(status.CodeNoLearner, "", learnerBasis, true, "no learner"))
	}

	const connBasis = "a voter not connected to every other voter: removing another could cost the quorum; and a window with samples taken while a voter was cut off measured a partition, not the paths: it is not judged for a swap until they roll out"
	peers := len(voters) - 1
	n = len(out)
	for _, v := range voters {
		if r, cut := cutOff(v, voters, links, j.forgiven+1); cut && v.node.Name != leaving {
			out = append(out, step(status.CodeVoterCutOff, v.node.Name, connBasis, false, r))
			continue
		}
		x := v.etcd
		if x == nil {
			continue
		}
		var r status.Reason
		switch {
		case x.connectedPeers < peers:
			r = step(status.CodePeersDisconnected, v.node.Name, connBasis, false,
				fmt.Sprintf("%s's etcd is connected to %d of the %d other voters", v.node.Name, x.connectedPeers, peers))
			r.Value = num(float64(x.connectedPeers))
		case x.fewestPeers < peers:
			r = step(status.CodePeersDisconnectedInWindow, v.node.Name, connBasis, false,
				fmt.Sprintf("%s's etcd was connected to %d of the %d other voters at %s, in its window: held until that sample rolls out of the window",
					v.node.Name, x.fewestPeers, peers, x.fewestAt.UTC().Format(time.RFC3339)))
			r.Value = num(float64(x.fewestPeers))
		default:
			continue
		}
		r.Limit, r.Unit, r.Rule = num(float64(peers)), "peers", settings.AtLeast
		out = append(out, r)
	}
	if len(out) == n {
		out = append(out, step(status.CodeAllConnected, "", connBasis, true, fmt.Sprintf("every voter that reported has been connected to the %d others at every sample of its window", peers)))
	}

	const membersBasis = "a swap adds one member and then removes one, so it starts from target_voters members"
	count := len(voters) + len(learners)
	var views []string
	for _, v := range voters {
		if x := v.etcd; x != nil && x.knownPeers+1 != s.TargetVoters {
			views = append(views, fmt.Sprintf("%s's etcd knows %d members", v.node.Name, x.knownPeers+1))
		}
	}
	r := step(status.CodeMembersAtTarget, "", membersBasis, count == s.TargetVoters && len(views) == 0,
		fmt.Sprintf("%d etcd members (voters %d, learners %d), target_voters %d", count, len(voters), len(learners), s.TargetVoters))
	if !r.OK {
		r.Code = status.CodeMembersOffTarget
	}
	if len(views) > 0 {
		r.Detail += "; " + strings.Join(views, "; ")
	}
	r.Value, r.Limit, r.Unit = num(float64(count)), num(float64(s.TargetVoters)), "members"
	out = append(out, r)

	l := s.Cooldown()
	since := now.Sub(mem.VotersChangedAt)
	c := against(l, status.GateCooldown, "", since.Seconds(), "the voter set ("+strings.Join(mem.Voters, ", ")+") last changed "+
		since.Round(time.Millisecond).String()+" ago, at "+mem.VotersChangedAt.Format(time.RFC3339)+"; cooldown "+l.Duration().String())
	c.Code = status.CodeCooldownRunning
	if c.OK {
		c.Code = status.CodeCooldownOver
	}
	// Its value and detail state an age: the fingerprint compares when the
	// set changed (in the memory) and whether the cooldown has run.
	c.Since = mem.VotersChangedAt
	out = append(out, c)
	return out
}

// cutOff reports whether the latest need connects between v and each other
// voter failed, both ways, at both ends: v is cut off from the other voters.
// etcd's own gauges show it only once its streams time out and v's election
// timeout has passed (a partitioned follower stays connected and led in the
// others' gauges for seconds, docs/facts.md), while the probes' connects
// fail from their next sample. need is the samples that turn a tail slow:
// the slow links of a cut are named no sooner than it is seen, and the
// swap, published a round of writes later, never before; and a lossy path,
// whose connects fail each on its own, is seen cut off only when every one
// of them failed need times in a row. A link with an end that measured
// nothing says nothing either way.
func cutOff(v *host, voters []*host, links *linkMatrix, need int) (string, bool) {
	if links == nil || len(voters) < 2 {
		return "", false
	}
	for _, w := range voters {
		if w == v {
			continue
		}
		for _, e := range []*linkEnd{links.at(v.node.Name, w.node.Name), links.at(w.node.Name, v.node.Name)} {
			if e == nil || e.connect == nil || e.connect.trailingFailed < need {
				return "", false
			}
		}
	}
	return fmt.Sprintf("%s is cut off from the other voters: its latest %d connects to and from each of them failed, both ways", v.node.Name, need), true
}
