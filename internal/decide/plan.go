package decide

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Decision reason signals: each step of the plan and each gate.
const (
	StepEtcd       = "etcd_present"
	StepEligible   = "eligible"
	StepReplace    = "replace"
	StepPinned     = "pinned"
	StepCandidate  = "candidate"
	GateReported   = "gate_reported"
	GateLeader     = "gate_leader"
	GateLearner    = "gate_learner"
	GateConnected  = "gate_connected"
	GateMembers    = "gate_members"
	GateCooldown   = "gate_cooldown"
	etcdRoleLabel  = "node-role.kubernetes.io/etcd"
	etcdRoleRemark = etcdRoleLabel + "=true"
)

func step(signal, subject, basis string, ok bool, detail string) Reason {
	return Reason{Signal: signal, Subject: subject, Basis: basis, OK: ok, Detail: detail}
}

// plan decides the swap. Each reason's ok says whether that step lets the
// swap go ahead; the action is a swap only when every one does.
func plan(s settings.Settings, now time.Time, hosts []*host, mem Memory) Decision {
	d := Decision{Action: ActionNone, Reasons: []Reason{}}
	var voters, learners, standbys []*host
	eligible := 0
	labelled := 0
	for _, h := range hosts {
		switch h.role {
		case RoleVoter:
			voters = append(voters, h)
		case RoleLearner:
			learners = append(learners, h)
		case RoleStandby:
			standbys = append(standbys, h)
		}
		if h.node.Eligible {
			eligible++
		}
		if h.node.EligibleMarked {
			labelled++
		}
	}

	if len(voters)+len(learners) == 0 {
		d.Reasons = append(d.Reasons, step(StepEtcd, "", "fleet-role judges etcd voters; k3s labels every etcd server "+etcdRoleRemark, false,
			"refused: no node carries "+etcdRoleRemark+", so this cluster has no embedded etcd to judge"))
		return d
	}
	d.Reasons = append(d.Reasons, step(StepEtcd, "", "k3s labels every etcd server "+etcdRoleRemark, true,
		fmt.Sprintf("%d nodes carry %s", len(voters)+len(learners), etcdRoleRemark)))

	eligibleBasis := fmt.Sprintf("hosts are marked eligible with the label %s=true; with none marked fleet-role only reports verdicts, and once any is marked at least target_voters %d must be", s.EligibleLabel, s.TargetVoters)
	switch {
	case eligible == 0:
		why := fmt.Sprintf("no node carries the label %s", s.EligibleLabel)
		if labelled > 0 {
			why = fmt.Sprintf("%d nodes carry the label %s but none reads true", labelled, s.EligibleLabel)
		}
		d.Reasons = append(d.Reasons, step(StepEligible, "", eligibleBasis, false, why+": verdicts only, never a swap"))
		return d
	case eligible < s.TargetVoters:
		r := step(StepEligible, "", eligibleBasis, false,
			fmt.Sprintf("refused: %d hosts are marked eligible, fewer than target_voters %d", eligible, s.TargetVoters))
		r.Value, r.Limit, r.Unit, r.Rule = num(float64(eligible)), num(float64(s.TargetVoters)), "hosts", settings.AtLeast
		d.Reasons = append(d.Reasons, r)
		return d
	}
	r := step(StepEligible, "", eligibleBasis, true, fmt.Sprintf("%d hosts are marked eligible, target_voters %d", eligible, s.TargetVoters))
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(eligible)), num(float64(s.TargetVoters)), "hosts", settings.AtLeast
	d.Reasons = append(d.Reasons, r)

	out, in := choose(s, voters, standbys, &d)
	d.Reasons = append(d.Reasons, gates(s, now, voters, learners, mem)...)
	if out == "" || in == "" {
		return d
	}
	for _, r := range d.Reasons {
		// A candidate's ok says whether it is fit; the choice is made.
		if !r.OK && r.Signal != StepCandidate {
			return d
		}
	}
	d.Action, d.Out, d.In = ActionSwap, out, in
	return d
}

// choose picks the voter to replace and the standby to replace it with,
// adding a reason for each step.
func choose(s settings.Settings, voters, standbys []*host, d *Decision) (out, in string) {
	const replaceBasis = "a slow link between voters makes both its ends unfit, so the unfit voter on the most slow links is the one to replace (ties on slow links: an unpinned voter, which takes the same links out; then the worst margin over its limits, then the name)"
	var unfit []*host
	var unknown []string
	for _, v := range voters {
		switch v.verdict {
		case Unfit:
			unfit = append(unfit, v)
		case Unknown:
			unknown = append(unknown, v.node.Name)
		}
	}
	if len(unfit) == 0 {
		why := "every voter is fit: nothing to replace"
		if len(unknown) > 0 {
			why = fmt.Sprintf("no voter is unfit (unknown: %s): nothing to replace", strings.Join(unknown, ", "))
		}
		d.Reasons = append(d.Reasons, step(StepReplace, "", replaceBasis, false, why))
		return "", ""
	}
	type ranked struct {
		h     *host
		links []string
		worst float64
	}
	// Two voters on as many slow links share the poor paths that make them
	// unfit, and either taken out takes those links out: the unpinned one
	// goes, where a margin between two readings of one link would be noise
	// naming the pinned one. With no slow link the voter is unfit on its own
	// (a disk, memory), and a pinned one stays the one to replace.
	pinnedLast := func(a, b ranked) int {
		if len(a.links) == 0 || a.h.node.Pinned == b.h.node.Pinned {
			return 0
		}
		if a.h.node.Pinned {
			return 1
		}
		return -1
	}
	var rs []ranked
	for _, v := range unfit {
		rs = append(rs, ranked{v, slowLinks(v.reasons), minHeadroom(v.reasons, failedMeasure)})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(len(b.links), len(a.links)), pinnedLast(a, b), cmp.Compare(a.worst, b.worst), cmp.Compare(a.h.node.Name, b.h.node.Name))
	})
	leaving := rs[0]
	r := step(StepReplace, leaving.h.node.Name, replaceBasis, true,
		fmt.Sprintf("%s is the unfit voter on the most slow links (%d%s); its worst reason: %s; unfit voters: %s",
			leaving.h.node.Name, len(leaving.links), listIn(leaving.links), worstOf(leaving.h.reasons), names(unfit)))
	r.Value, r.Unit = num(float64(len(leaving.links))), "links"
	d.Reasons = append(d.Reasons, r)
	out = leaving.h.node.Name
	if leaving.h.node.Pinned {
		d.Reasons = append(d.Reasons, step(StepPinned, out, fmt.Sprintf("a voter labelled %s=true is never swapped out, and no other voter is swapped in its place (it is not the one on the poor path)", s.PinnedLabel), false,
			fmt.Sprintf("%s is pinned: nothing is swapped", out)))
		return out, ""
	}

	var remaining []string
	for _, v := range voters {
		if v.node.Name != out {
			remaining = append(remaining, v.node.Name)
		}
	}
	const candBasis = "a standby is judged against the voters that would remain: its slow link to the voter leaving does not count; among fit standbys the largest headroom (its tightest signal, as a fraction of the limit) wins"
	best, bestMargin := "", math.Inf(-1)
	var cands []Reason
	for _, c := range standbys {
		ok, margin, why := candidate(c, out, remaining)
		r := step(StepCandidate, c.node.Name, candBasis, ok, why)
		if !math.IsInf(margin, 0) {
			r.Value, r.Unit = num(margin), "fraction"
		}
		cands = append(cands, r)
		if ok && (best == "" || margin > bestMargin) {
			best, bestMargin = c.node.Name, margin
		}
	}
	if best == "" {
		why := "no standby to replace " + out + " with"
		if len(standbys) > 0 {
			why = fmt.Sprintf("no standby is fit against the voters that would remain (%s): nothing is swapped", strings.Join(remaining, ", "))
		}
		cands = append(cands, step(StepCandidate, "", candBasis, false, why))
	}
	d.Reasons = append(d.Reasons, cands...)
	return out, best
}

// candidate judges standby c against the voters that would remain when out
// leaves.
func candidate(c *host, out string, remaining []string) (ok bool, margin float64, why string) {
	counts := func(r Reason) bool { return r.Subject != out || !isLink(r) }
	var bad []string
	for _, r := range c.reasons {
		if r.OK || !counts(r) {
			continue
		}
		if r.unknown {
			return false, math.Inf(-1), fmt.Sprintf("%s is unknown: %s", c.node.Name, r.Detail)
		}
		bad = append(bad, Summary(r))
	}
	if len(bad) > 0 {
		return false, math.Inf(-1), fmt.Sprintf("%s is unfit against the voters that would remain: %s", c.node.Name, strings.Join(bad, "; "))
	}
	for _, v := range remaining {
		measured := false
		for _, r := range c.reasons {
			if r.Signal == SignalConnect && r.Subject == v && r.Value != nil {
				measured = true
			}
		}
		if !measured {
			return false, math.Inf(-1), fmt.Sprintf("%s has no connect measured to %s, a voter that would remain", c.node.Name, v)
		}
	}
	margin = minHeadroom(c.reasons, func(r Reason) bool { return counts(r) && isMeasure(r) && r.Value != nil })
	why = fmt.Sprintf("%s is fit against %s, tightest headroom %s", c.node.Name, strings.Join(remaining, ", "), formatMargin(margin))
	if slices.Contains(slowLinks(c.reasons), out) {
		why += fmt.Sprintf(" (its slow link to %s, the voter leaving, does not count)", out)
	}
	return true, margin, why
}

// gates are the conditions under which no change is made, however fit the
// plan.
func gates(s settings.Settings, now time.Time, voters, learners []*host, mem Memory) []Reason {
	var out []Reason
	const reportedBasis = "a voter whose probe has not reported may be paused or cut off while its last sample still looks healthy: no change on stale readings"
	n := len(out)
	for _, v := range voters {
		if v.verdict == Unknown {
			out = append(out, step(GateReported, v.node.Name, reportedBasis, false,
				fmt.Sprintf("%s is unknown, its probe has not reported a full, fresh, readable window: %s", v.node.Name, firstUnknown(v.reasons))))
		}
	}
	if len(out) == n {
		out = append(out, step(GateReported, "", reportedBasis, true, "every voter's probe has reported a full, fresh window"))
	}

	const leaderBasis = "etcd without a leader cannot take a membership change"
	n = len(out)
	for _, v := range voters {
		if x := latestEtcd(v.window); x != nil && !x.HasLeader {
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
		x := latestEtcd(v.window)
		if x == nil || x.ConnectedPeers >= peers {
			continue
		}
		r := step(GateConnected, v.node.Name, connBasis, false,
			fmt.Sprintf("%s's etcd is connected to %d of the %d other voters", v.node.Name, x.ConnectedPeers, peers))
		r.Value, r.Limit, r.Unit, r.Rule = num(float64(x.ConnectedPeers)), num(float64(peers)), "peers", settings.AtLeast
		out = append(out, r)
	}
	if len(out) == n {
		out = append(out, step(GateConnected, "", connBasis, true, fmt.Sprintf("every voter that reported is connected to the %d others", peers)))
	}

	const membersBasis = "a swap adds one member and then removes one, so it starts from target_voters members"
	count := len(voters) + len(learners)
	var views []string
	for _, v := range voters {
		if x := latestEtcd(v.window); x != nil && x.KnownPeers+1 != s.TargetVoters {
			views = append(views, fmt.Sprintf("%s's etcd knows %d members", v.node.Name, x.KnownPeers+1))
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
	c := against(l, GateCooldown, "", since.Seconds(), fmt.Sprintf("the voter set (%s) last changed %v ago, at %s; cooldown %v",
		strings.Join(mem.Voters, ", "), since.Round(time.Millisecond), mem.VotersChangedAt.Format(time.RFC3339), l.Duration()))
	out = append(out, c)
	return out
}

func firstUnknown(rs []Reason) string {
	for _, r := range rs {
		if !r.OK && r.unknown {
			return r.Detail
		}
	}
	return "unknown"
}

// failedMeasure selects the reasons that make a host unfit.
func failedMeasure(r Reason) bool { return !r.OK && !r.unknown && isMeasure(r) }

// worstOf names the reason furthest over its limit, with its margin.
func worstOf(rs []Reason) string {
	var worst *Reason
	for i := range rs {
		if failedMeasure(rs[i]) && (worst == nil || headroom(rs[i]) < headroom(*worst)) {
			worst = &rs[i]
		}
	}
	if worst == nil {
		return "none"
	}
	if worst.Value == nil {
		return Summary(*worst)
	}
	return fmt.Sprintf("%s (%s)", Summary(*worst), overBy(headroom(*worst)))
}

// overBy says how far over its limit a failed reason is, in words.
func overBy(m float64) string {
	if math.IsInf(m, 0) {
		return formatMargin(m)
	}
	return fmt.Sprintf("%.1f%% over the limit", -m*100)
}

func formatMargin(m float64) string {
	switch {
	case math.IsInf(m, -1):
		return "failed"
	case math.IsInf(m, 1):
		return "unbounded"
	}
	return fmt.Sprintf("%+.1f%%", m*100)
}

func listIn(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": " + strings.Join(xs, ", ")
}

func names(hs []*host) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.node.Name)
	}
	return strings.Join(out, ", ")
}
