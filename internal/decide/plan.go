package decide

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// The plan reads the hosts' judgements and the link matrix, never their
// reasons, and writes one reason per step, in order: the records'
// protection while they are unprotected (protection.go), etcd present and
// eligible hosts (here), the whole-fleet rule (fleetwide.go), the
// attribution of slow links (attribution.go), the voter to replace
// (replace.go), the candidates (candidates.go), the gates (gates.go) and
// the hysteresis (hysteresis.go).

// etcdRoleRemark is how the plan's words name k3s's etcd label.
const etcdRoleRemark = k3snode.EtcdRoleLabel + "=true"

// step is a reason of the plan: its signal follows from its code.
func step(code status.Code, subject, basis string, ok bool, detail string) status.Reason {
	return status.Reason{Signal: status.SignalOfCode(code), Code: code, Subject: subject, Basis: basis, OK: ok, Detail: detail}
}

// plan decides the swap. Each reason's ok says whether that step lets the
// swap go ahead; the action is a swap only when every one does, the last
// being that the same swap was named at enough consecutive decisions. It
// records in mem what the next decision needs of this one.
func plan(j *limits, hosts []*host, links *linkMatrix, prev *status.Status, mem *status.Memory) status.Decision {
	d := decideSwap(j, hosts, links, prev, mem)
	d.Deciding = decidingStep(d)
	tally(prev, hosts, d, mem)
	return d
}

// decidingStep is the index of the step that decides d's action: for a
// swap, the replace step that names the voter taken out; otherwise the
// first step that holds the swap back. A standby's candidacy that is not
// fit holds nothing (another may be chosen); the closing candidate without
// a subject, none fit, does. Nil when no step holds (there is always one).
func decidingStep(d status.Decision) *int {
	for i, r := range d.Reasons {
		if d.Action == status.ActionSwap && r.Code.Leaving() || d.Action != status.ActionSwap && !r.OK && !r.Code.Candidacy() {
			return &i
		}
	}
	return nil
}

func decideSwap(j *limits, hosts []*host, links *linkMatrix, prev *status.Status, mem *status.Memory) status.Decision {
	s := j.s
	d := status.Decision{Action: status.ActionNone, Reasons: []status.Reason{}}
	// The records unprotected hold the whole plan, first: a fleet-wide
	// fact, said whatever else holds the swap (protection.go). The plan
	// goes on, so that the status still shows what it would do.
	if r, held := protectedGate(j, j.protection); held {
		d.Reasons = append(d.Reasons, r)
	}
	var voters, learners, standbys []*host
	eligible := 0
	labelled := 0
	for _, h := range hosts {
		switch h.role {
		case status.RoleVoter:
			voters = append(voters, h)
		case status.RoleLearner:
			learners = append(learners, h)
		case status.RoleStandby:
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
		d.Reasons = append(d.Reasons, step(status.CodeNoEtcd, "", "fleet-role judges etcd voters; k3s labels every etcd server "+etcdRoleRemark, false,
			"refused: no node carries "+etcdRoleRemark+", so this cluster has no embedded etcd to judge"))
		return d
	}
	d.Reasons = append(d.Reasons, step(status.CodeEtcdPresent, "", "k3s labels every etcd server "+etcdRoleRemark, true,
		fmt.Sprintf("%d nodes carry %s", len(voters)+len(learners), etcdRoleRemark)))

	eligibleBasis := fmt.Sprintf("hosts are marked eligible with the label %s=true; with none marked fleet-role only reports verdicts, and once any is marked at least target_voters %d must be", s.EligibleLabel, s.TargetVoters)
	switch {
	case eligible == 0:
		why := fmt.Sprintf("no node carries the label %s", s.EligibleLabel)
		if labelled > 0 {
			why = fmt.Sprintf("%d nodes carry the label %s but none reads true", labelled, s.EligibleLabel)
		}
		d.Reasons = append(d.Reasons, step(status.CodeNoneEligible, "", eligibleBasis, false, why+": verdicts only, never a swap"))
		return d
	case eligible < s.TargetVoters:
		r := step(status.CodeTooFewEligible, "", eligibleBasis, false,
			fmt.Sprintf("refused: %d hosts are marked eligible, fewer than target_voters %d", eligible, s.TargetVoters))
		r.Value, r.Limit, r.Unit, r.Rule = num(float64(eligible)), num(float64(s.TargetVoters)), "hosts", settings.AtLeast
		d.Reasons = append(d.Reasons, r)
		return d
	}
	r := step(status.CodeEnoughEligible, "", eligibleBasis, true, fmt.Sprintf("%d hosts are marked eligible, target_voters %d", eligible, s.TargetVoters))
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(eligible)), num(float64(s.TargetVoters)), "hosts", settings.AtLeast
	d.Reasons = append(d.Reasons, r)

	out, in := choose(j, hosts, voters, standbys, links, prev, mem, &d)
	d.Reasons = append(d.Reasons, gates(j, voters, learners, links, *mem, published(prev, mem.Voters))...)
	if out == "" || in == "" {
		return d
	}
	for _, r := range d.Reasons {
		// A candidate's ok says whether it is fit; the choice is made. A
		// pinned voter passed over is ok too.
		if !r.OK && !r.Code.Candidacy() {
			return d
		}
	}
	r = steady(prev, j.now, voters, out, in, mem)
	d.Reasons = append(d.Reasons, r)
	if r.OK {
		d.Action, d.Out, d.In = status.ActionSwap, out, in
	}
	return d
}

// choose picks the voter to replace and the standby to replace it with,
// adding a reason for each step: the whole-fleet rule, the attribution of
// slow links, the voter to replace, pinning, the candidates.
func choose(j *limits, hosts, voters, standbys []*host, links *linkMatrix, prev *status.Status, mem *status.Memory, d *status.Decision) (out, in string) {
	if len(slowVoterLinks(voters, links, kindConnect)) > 0 {
		mem.ConnectsSlowAt = j.now
	}
	if late := lateMember(j, voters); late != "" {
		mem.MemberLateAt, mem.MemberLate = j.now, late
	}
	fw, shared := fleetWide(hosts)
	d.Reasons = append(d.Reasons, fw...)
	if shared {
		return "", ""
	}
	var at status.Reason
	var suspects []*host
	slow, lagging := false, false
	if len(slowVoterLinks(voters, links, kindConnect)) == 0 {
		at, lagging = rttLagging(j.now, *mem, slowVoterLinks(voters, links, kindPeerRTT))
	}
	if !lagging {
		at, suspects, slow = attribute(j.s, voters, links)
		for _, h := range suspects {
			d.Implicated = append(d.Implicated, h.node.Name)
		}
		slices.Sort(d.Implicated)
	}
	d.Reasons = append(d.Reasons, at)
	if !at.OK {
		return "", ""
	}
	byName := make(map[string]*host, len(hosts))
	for _, h := range hosts {
		byName[h.node.Name] = h
	}
	var leaving *host
	if slow {
		leaving = onMostSlowLinks(j, voters, suspects, links, byName, named(prev), d)
	} else {
		leaving = worstOwnReadings(j, voters, links, byName, d)
	}
	if leaving == nil {
		return "", ""
	}
	out = leaving.node.Name
	return out, candidates(j, voters, standbys, out, suspects, links, d)
}

// worstOf names the host's judgement furthest over its limit, with its
// margin.
func worstOf(j *limits, h *host) string {
	var worst *judgement
	for i := range h.all {
		if g := &h.all[i]; g.failedMeasure() && (worst == nil || g.headroom() < worst.headroom()) {
			worst = g
		}
	}
	if worst == nil {
		return "none"
	}
	r := worst.reason(j, h.node.Name)
	if r.Value == nil {
		return status.Summary(r)
	}
	return fmt.Sprintf("%s (%s)", status.Summary(r), overBy(worst.headroom()))
}

// firstUnknown is the reason of the host's first judgement that makes it
// unknown.
func firstUnknown(j *limits, h *host) status.Reason {
	for i := range h.all {
		if g := &h.all[i]; g.out == unknown {
			return g.reason(j, h.node.Name)
		}
	}
	return status.Reason{Detail: "unknown"}
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
	// As %+.1f%% writes it, without fmt: a decision writes one a standby.
	sign := "+"
	if math.Signbit(m) {
		sign = ""
	}
	return sign + strconv.FormatFloat(m*100, 'f', 1, 64) + "%"
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

// named is the voter the previous decision named to leave, "" when none.
func named(prev *status.Status) string {
	if prev == nil {
		return ""
	}
	return prev.Memory.Named
}

// published is the voter the swap published at the previous decision
// removes, when the voter set is the same now, or "".
func published(prev *status.Status, voters []string) string {
	if prev == nil || prev.Decision.Action != status.ActionSwap || !slices.Equal(prev.Memory.Voters, voters) {
		return ""
	}
	return prev.Decision.Out
}
