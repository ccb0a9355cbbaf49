package decide

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// The plan, step by step: etcd present and eligible hosts (here), the
// whole-fleet rule (fleetwide.go), the attribution of slow links
// (attribution.go), the voter to replace (replace.go), the candidates
// (candidates.go), the gates (gates.go) and the hysteresis
// (hysteresis.go).

// Decision reason signals: each step of the plan and each gate.
const (
	StepEtcd        = "etcd_present"
	StepEligible    = "eligible"
	StepFleetWide   = "fleet_wide"
	StepAttribution = "attribution"
	StepReplace     = "replace"
	StepPinned      = "pinned"
	StepCandidate   = "candidate"
	GateReported    = "gate_reported"
	GateLeader      = "gate_leader"
	GateLearner     = "gate_learner"
	GateConnected   = "gate_connected"
	GateMembers     = "gate_members"
	GateCooldown    = "gate_cooldown"
	StepSteady      = "steady"
	etcdRoleLabel   = "node-role.kubernetes.io/etcd"
	etcdRoleRemark  = etcdRoleLabel + "=true"
)

func step(signal, subject, basis string, ok bool, detail string) Reason {
	return Reason{Signal: signal, Subject: subject, Basis: basis, OK: ok, Detail: detail}
}

// plan decides the swap. Each reason's ok says whether that step lets the
// swap go ahead; the action is a swap only when every one does, the last
// being that the same swap was named at enough consecutive decisions. It
// records in mem what the next decision needs of this one.
func plan(s settings.Settings, now time.Time, hosts []*host, prev *Status, mem *Memory) Decision {
	d := decideSwap(s, now, hosts, prev, mem)
	tally(prev, hosts, d, mem)
	return d
}

func decideSwap(s settings.Settings, now time.Time, hosts []*host, prev *Status, mem *Memory) Decision {
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

	out, in := choose(s, hosts, voters, standbys, &d)
	d.Reasons = append(d.Reasons, gates(s, now, voters, learners, *mem)...)
	if out == "" || in == "" {
		return d
	}
	for _, r := range d.Reasons {
		// A candidate's ok says whether it is fit; the choice is made. A
		// pinned voter passed over is ok too.
		if !r.OK && r.Signal != StepCandidate {
			return d
		}
	}
	r = steady(prev, now, voters, out, in, mem)
	d.Reasons = append(d.Reasons, r)
	if r.OK {
		d.Action, d.Out, d.In = ActionSwap, out, in
	}
	return d
}

// choose picks the voter to replace and the standby to replace it with,
// adding a reason for each step: the whole-fleet rule, the attribution of
// slow links, the voter to replace, pinning, the candidates.
func choose(s settings.Settings, hosts, voters, standbys []*host, d *Decision) (out, in string) {
	fw, shared := fleetWide(hosts)
	d.Reasons = append(d.Reasons, fw...)
	if shared {
		return "", ""
	}
	at, suspects, slow := attribute(s, voters)
	d.Reasons = append(d.Reasons, at)
	if !at.OK {
		return "", ""
	}
	var leaving *host
	if slow {
		leaving = onMostSlowLinks(s, voters, suspects, d)
	} else {
		leaving = worstOwnReadings(s, voters, d)
	}
	if leaving == nil {
		return "", ""
	}
	out = leaving.node.Name

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
