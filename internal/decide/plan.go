package decide

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
)

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

// hostLocal are the host-local limits the whole-fleet rule counts, by what
// they measure. Links are the attribution rule's, and a link's class (Wi-Fi)
// is a host's own choice of interface, not a shared fault.
var hostLocal = []struct {
	name    string
	signals []string
}{
	{"disk", []string{SignalWALFsync, SignalBackendCommit, SignalFdatasync}},
	{"memory", []string{SignalMemory}},
	{"memory stall", []string{SignalStall}},
}

const fleetWideBasis = "a host-local limit (disk: wal_fsync, backend_commit or fdatasync; memory: memory_available; memory stall: memory_full_stall) breached by most recording hosts in the same window is a fault they share (a hypervisor, a storage array, the machine), not a host's: swapping one host changes nothing (TiKV PD acts only when one store is slow; Cluster API stops remediating when too many machines are unhealthy at once). Recording hosts are those judged on a full, fresh window; most is more than half"

// fleetWide is the whole-fleet rule: one reason per host-local limit that
// most recording hosts breach (each not ok: nothing is swapped), or one ok
// reason with the largest count. shared reports a breach.
func fleetWide(hosts []*host) (rs []Reason, shared bool) {
	var recording []*host
	for _, h := range hosts {
		if h.judged && h.decoded {
			recording = append(recording, h)
		}
	}
	n := len(recording)
	half := float64(n) / 2
	var counts []string
	most, mostName := 0, ""
	for _, c := range hostLocal {
		var breach []string
		for _, h := range recording {
			for _, r := range h.reasons {
				if failedMeasure(r) && slices.Contains(c.signals, r.Signal) {
					breach = append(breach, h.node.Name)
					break
				}
			}
		}
		counts = append(counts, fmt.Sprintf("%s %d", c.name, len(breach)))
		if len(breach) > most {
			most, mostName = len(breach), c.name
		}
		if float64(len(breach)) > half {
			r := step(StepFleetWide, c.name, fleetWideBasis, false,
				fmt.Sprintf("%s is over its limit on %d of the %d recording hosts (%s), more than half: a fault the fleet shares, not a host's; the verdicts stand as measured: nothing is swapped",
					c.name, len(breach), n, strings.Join(breach, ", ")))
			r.Value, r.Limit, r.Unit, r.Rule = num(float64(len(breach))), num(half), "hosts", settings.AtMost
			rs = append(rs, r)
		}
	}
	if len(rs) > 0 {
		return rs, true
	}
	r := step(StepFleetWide, mostName, fleetWideBasis, true,
		fmt.Sprintf("no host-local limit is over on more than half of the %d recording hosts (%s)", n, strings.Join(counts, ", ")))
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(most)), num(half), "hosts", settings.AtMost
	return []Reason{r}, false
}

// maxMembers is etcd's largest cluster (FACTS.md, "Cluster size: no more
// than 7"); it bounds the brute-force search for the smallest cover at 2^7
// sets of voters.
const maxMembers = 7

const attributionBasis = "slow links no single host explains are a fault of the network or of the whole machine, not of a host (TiKV PD acts only when one store is slow). The slow links are those either end measured over the limit by connect, which times the path alone; by etcd's peer round trip only when no connect between voters is slow, since etcd's round trip also times both members' etcd (a slow leader raised it between two healthy followers past the limit, their connects fit: docs/limits.md). Among the voters, the smallest sets of voters that touch every slow link (each a minimum vertex cover) explain them only when they are a minority of the voters and some link between two voters outside the set is measured fit, no more of the connects from both its ends together over the limit than the tail forgives one window (the network itself is sound); the voters of every such set are the ones that may be replaced"

// link is a path between two voters, its ends in name order.
type link [2]string

func (l link) String() string { return l[0] + "-" + l[1] }

// attribute is the attribution rule over the slow links between voters. It
// returns its reason (not ok: no host explains them, nothing is swapped),
// the voters of the smallest sets that explain them, and whether any link
// between voters is slow.
func attribute(s settings.Settings, voters []*host) (r Reason, suspects []*host, slow bool) {
	byName := map[string]*host{}
	var vnames []string
	for _, v := range voters {
		byName[v.node.Name] = v
		vnames = append(vnames, v.node.Name)
	}
	// The connects decide where any is slow; etcd's own round trips only
	// where none is (attributionBasis).
	set, by := slowVoterLinks(voters, byName, SignalConnect), SignalConnect
	if len(set) == 0 {
		set, by = slowVoterLinks(voters, byName, SignalPeerRTT), SignalPeerRTT
	}
	if len(set) == 0 {
		return step(StepAttribution, "", attributionBasis, true, "no link between voters is slow: a voter is unfit by its own readings only"), nil, false
	}
	links := slices.SortedFunc(maps.Keys(set), func(a, b link) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	n := len(vnames)
	minority := (n - 1) / 2
	listed := "by " + by + ": " + joinLinks(links)
	if by == SignalPeerRTT {
		listed = "by peer_rtt (no connect between voters is slow): " + joinLinks(links)
	}
	if n > maxMembers {
		r := step(StepAttribution, "", attributionBasis, false,
			fmt.Sprintf("slow links between voters %s; %d voters, more than etcd's %d members: not attributed, nothing is swapped", listed, n, maxMembers))
		return r, nil, true
	}
	size, covers := minCovers(vnames, links)
	r = step(StepAttribution, "", attributionBasis, false, "")
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(size)), num(float64(minority)), "hosts", settings.AtMost
	if size > minority {
		r.Detail = fmt.Sprintf("slow links between voters %s; the smallest set of voters that touches every one has %d of the %d voters (%s), not a minority: no host explains them, the fault is the network's or the whole machine's: nothing is swapped",
			listed, size, n, joinSets(covers))
		return r, nil, true
	}
	var explain []string
	var unsound []string
	blamed := map[string]bool{}
	for _, c := range covers {
		fit, ok := fitOutside(s, voters, c)
		if !ok {
			unsound = append(unsound, "{"+strings.Join(c, ", ")+"}")
			continue
		}
		explain = append(explain, fmt.Sprintf("{%s}, with %s outside it", strings.Join(c, ", "), fit))
		for _, x := range c {
			blamed[x] = true
		}
	}
	if len(explain) == 0 {
		r.Detail = fmt.Sprintf("slow links between voters %s; the smallest sets of voters that touch every one (%s, %d of the %d voters) are a minority, but outside each no link between voters is measured fit from both ends together, so nothing shows the network itself is sound: no host explains them: nothing is swapped",
			listed, strings.Join(unsound, "; "), size, n)
		return r, nil, true
	}
	for _, v := range voters {
		if blamed[v.node.Name] {
			suspects = append(suspects, v)
		}
	}
	r.OK = true
	r.Detail = fmt.Sprintf("slow links between voters %s; the smallest sets of voters that touch every one have %d of the %d voters, a minority: %s",
		listed, size, n, strings.Join(explain, "; "))
	if len(unsound) > 0 {
		r.Detail += fmt.Sprintf("; not %s, outside which no link is measured fit", strings.Join(unsound, "; "))
	}
	r.Detail += "; they explain the slow links: " + names(suspects)
	return r, suspects, true
}

// slowVoterLinks is the links between voters that either end measured over
// its limit by signal.
func slowVoterLinks(voters []*host, byName map[string]*host, signal string) map[link]bool {
	set := map[link]bool{}
	for _, v := range voters {
		for _, r := range v.reasons {
			if r.Signal == signal && !r.OK && byName[r.Subject] != nil {
				set[linkOf(v.node.Name, r.Subject)] = true
			}
		}
	}
	return set
}

func linkOf(a, b string) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

func joinLinks(ls []link) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return strings.Join(out, ", ")
}

func joinSets(sets [][]string) string {
	out := make([]string, len(sets))
	for i, c := range sets {
		out[i] = "{" + strings.Join(c, ", ") + "}"
	}
	return strings.Join(out, "; ")
}

// minCovers returns the size of the smallest sets of names that touch every
// link (minimum vertex covers) and every such set, each in name order, the
// sets in the order of their members' positions in names. Exact by brute
// force: names holds at most maxMembers.
func minCovers(names []string, links []link) (size int, covers [][]string) {
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
	}
	size = len(names) + 1
	var masks []uint
	for m := uint(0); m < 1<<len(names); m++ {
		k := bits.OnesCount(m)
		if k > size {
			continue
		}
		covered := true
		for _, l := range links {
			if m&(1<<idx[l[0]]) == 0 && m&(1<<idx[l[1]]) == 0 {
				covered = false
				break
			}
		}
		if !covered {
			continue
		}
		if k < size {
			size, masks = k, nil
		}
		masks = append(masks, m)
	}
	// Sets of one size in lexicographic order of their members.
	for _, m := range masks {
		var c []string
		for i, n := range names {
			if m&(1<<i) != 0 {
				c = append(c, n)
			}
		}
		covers = append(covers, c)
	}
	slices.SortFunc(covers, func(a, b []string) int { return slices.Compare(a, b) })
	return size, covers
}

// fitOutside finds a link between two voters outside cover that is measured
// fit, the evidence that the network itself is sound: the connects its two
// ends measured of each other, taken together, hold no more samples over the
// connect limit (or failed) than the tail rule forgives one window
// (window - ceil(p*window)). Taken together, because a stall of the whole
// machine that put the one sample the tail forgives in each end's window
// (and one more in the blamed host's) puts two in the link's.
func fitOutside(s settings.Settings, voters []*host, cover []string) (string, bool) {
	forgiven := s.Window - quantile.Rank(s.TailPercentile, s.Window)
	l := s.ConnectLimit()
	count := func(from, to *host) (slow, measured int) {
		col := from.connects[to.node.Name] // aligned with from.window
		if col == nil {
			return 0, 0
		}
		for i, at := range col.At {
			if c := col.Connect[i]; at {
				measured++
				if c.Err != "" || !l.OK(c.Seconds) {
					slow++
				}
			}
		}
		return slow, measured
	}
	for i, a := range voters {
		if slices.Contains(cover, a.node.Name) {
			continue
		}
		for _, b := range voters[i+1:] {
			if slices.Contains(cover, b.node.Name) {
				continue
			}
			s1, m1 := count(a, b)
			s2, m2 := count(b, a)
			if m1+m2 > 0 && s1+s2 <= forgiven {
				return fmt.Sprintf("%s measured fit (%d of its %d connects from both ends over %s, the tail forgives %d)",
					linkOf(a.node.Name, b.node.Name), s1+s2, m1+m2, FormatValue(l.Value, l.Unit), forgiven), true
			}
		}
	}
	return "", false
}

const replaceBasis = "with slow links between voters the attribution rule names the voters that explain them, and the one on the most slow links is replaced (ties: an unpinned voter, which takes the same links out; then the worst margin over its limits, then the name); a pinned one so chosen keeps its place and nothing is swapped. With no slow link, the unfit voter furthest over its limits (its worst margin, then the name) is replaced, passing over a pinned one for the next unpinned"

// onMostSlowLinks is the voter to replace among those the attribution rule
// names: the one on the most slow links. A pinned voter so chosen stops the
// plan: the slow links stay with it whichever other voter goes.
func onMostSlowLinks(s settings.Settings, voters, suspects []*host, d *Decision) *host {
	type ranked struct {
		h     *host
		links []string
		worst float64
	}
	// Two voters on as many slow links share the poor paths that make them
	// unfit, and either taken out takes those links out: the unpinned one
	// goes, where a margin between two readings of one link would be noise
	// naming the pinned one.
	pinnedLast := func(a, b ranked) int {
		if a.h.node.Pinned == b.h.node.Pinned {
			return 0
		}
		if a.h.node.Pinned {
			return 1
		}
		return -1
	}
	var rs []ranked
	for _, v := range suspects {
		rs = append(rs, ranked{v, slowLinks(v.reasons), minHeadroom(v.reasons, failedMeasure)})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(len(b.links), len(a.links)), pinnedLast(a, b), cmp.Compare(a.worst, b.worst), cmp.Compare(a.h.node.Name, b.h.node.Name))
	})
	leaving := rs[0]
	r := step(StepReplace, leaving.h.node.Name, replaceBasis, true,
		fmt.Sprintf("%s is the voter on the most slow links (%d%s) of those that explain them (%s); its worst reason: %s; unfit voters: %s",
			leaving.h.node.Name, len(leaving.links), listIn(leaving.links), names(suspects), worstOf(leaving.h.reasons), names(unfitOf(voters))))
	r.Value, r.Unit = num(float64(len(leaving.links))), "links"
	d.Reasons = append(d.Reasons, r)
	if leaving.h.node.Pinned {
		d.Reasons = append(d.Reasons, step(StepPinned, leaving.h.node.Name, pinnedBasis(s), false,
			fmt.Sprintf("%s is pinned and on the most slow links: nothing is swapped (no other voter is swapped in its place: it is not the one on the poor paths)", leaving.h.node.Name)))
		return nil
	}
	return leaving.h
}

func pinnedBasis(s settings.Settings) string {
	return fmt.Sprintf("a voter labelled %s=true is never swapped out. On the most slow links it keeps them whichever other voter goes, so nothing is swapped; unfit by its own readings only, it is passed over for the next unfit unpinned voter", s.PinnedLabel)
}

// worstOwnReadings is the voter to replace when no link between voters is
// slow: every unfit voter is unfit by its own readings (disk, memory, link
// class), and the one furthest over its limits goes. A pinned voter is passed
// over for the next unpinned one: its fault is its own and stays with it, and
// another voter's is another's.
func worstOwnReadings(s settings.Settings, voters []*host, d *Decision) *host {
	unfit := unfitOf(voters)
	if len(unfit) == 0 {
		var unknown []string
		for _, v := range voters {
			if v.verdict == Unknown {
				unknown = append(unknown, v.node.Name)
			}
		}
		why := "every voter is fit: nothing to replace"
		if len(unknown) > 0 {
			why = fmt.Sprintf("no voter is unfit (unknown: %s): nothing to replace", strings.Join(unknown, ", "))
		}
		d.Reasons = append(d.Reasons, step(StepReplace, "", replaceBasis, false, why))
		return nil
	}
	worst := func(h *host) float64 { return minHeadroom(h.reasons, failedMeasure) }
	slices.SortStableFunc(unfit, func(a, b *host) int {
		return cmp.Or(cmp.Compare(worst(a), worst(b)), cmp.Compare(a.node.Name, b.node.Name))
	})
	var passed []string
	for _, v := range unfit {
		if v.node.Pinned {
			passed = append(passed, v.node.Name)
			d.Reasons = append(d.Reasons, step(StepPinned, v.node.Name, pinnedBasis(s), true,
				fmt.Sprintf("%s is pinned and unfit by its own readings only (%s): passed over for the next unfit unpinned voter", v.node.Name, worstOf(v.reasons))))
			continue
		}
		why := fmt.Sprintf("%s is the unfit voter furthest over its limits, by its own readings (no link between voters is slow); its worst reason: %s; unfit voters: %s",
			v.node.Name, worstOf(v.reasons), names(unfit))
		if len(passed) > 0 {
			why = fmt.Sprintf("%s is the next unfit unpinned voter after %s; its worst reason: %s; unfit voters: %s",
				v.node.Name, strings.Join(passed, ", "), worstOf(v.reasons), names(unfit))
		}
		r := step(StepReplace, v.node.Name, replaceBasis, true, why)
		r.Value, r.Unit = num(0), "links"
		d.Reasons = append(d.Reasons, r)
		return v
	}
	d.Reasons = append(d.Reasons, step(StepReplace, "", replaceBasis, false,
		fmt.Sprintf("every unfit voter is pinned (%s): nothing is swapped", strings.Join(passed, ", "))))
	return nil
}

func unfitOf(voters []*host) []*host {
	var out []*host
	for _, v := range voters {
		if v.verdict == Unfit {
			out = append(out, v)
		}
	}
	return out
}

// The hysteresis (docs/limits.md, "No flapping"). The attribution rule
// names no host for a stall of the whole machine once every host has written
// the samples the stall slowed; it can name one only while some hosts have
// written their sample of a period and others not yet. So a swap is
// published only at a decision at which every voter's record has changed
// since the first of the consecutive decisions that named the same voter:
// every voter has written at least one sample since, and that state is over.
// The test is the controller's own observation of each record (its digest
// changing, stamped with the decision's time), never the probes' clocks,
// which may disagree with each other. A real slow voter's swap, named at the
// first decision after its window turns it unfit, is published at the first
// decision at which every voter has written again: within a period and a
// half at the controller's two decisions a period (SteadyPeriods).
const steadyBasis = "a swap is published only at a decision at which every voter's record has changed since the first of the consecutive decisions that named the same voter to leave: a stall of the whole machine can name a host only while some hosts have written that period's sample and others not yet, which ends once every voter has written again; the records' changes are the controller's own observations, not the probes' clocks"

// SteadyPeriods bounds, in sample periods, how long the hysteresis holds a
// swap that stays named: every voter's next write lands within one period
// of the naming decision, and the controller's next decision within half a
// period after it (it decides twice a period); rounded up. The alerts take
// their durations from it (internal/alerts).
const SteadyPeriods = 2

// steady is the hysteresis: it carries in mem the voter named to leave and
// the time of the first of the consecutive decisions that named it, and
// holds the swap until every voter's record has been seen changing after
// that time.
func steady(prev *Status, now time.Time, voters []*host, out, in string, mem *Memory) Reason {
	mem.Named, mem.NamedSince, mem.NamedDecisions = out, now, 1
	if p := prev; p != nil && p.Memory.Named == out && p.Memory.NamedDecisions > 0 && !p.Memory.NamedSince.IsZero() && !p.Memory.NamedSince.After(now) {
		mem.NamedSince, mem.NamedDecisions = p.Memory.NamedSince, p.Memory.NamedDecisions+1
	}
	var waiting []string
	written := 0
	for _, v := range voters {
		if v.obs != nil && v.obs.ChangedAt.After(mem.NamedSince) {
			written++
		} else {
			waiting = append(waiting, v.node.Name)
		}
	}
	r := step(StepSteady, out, steadyBasis, len(waiting) == 0, "")
	r.Value, r.Limit, r.Unit, r.Rule = num(float64(written)), num(float64(len(voters))), "voters", settings.AtLeast
	times := "decisions"
	if mem.NamedDecisions == 1 {
		times = "decision"
	}
	since := fmt.Sprintf("%s has been named to leave (for %s) since %s, at %d %s in a row", out, in, mem.NamedSince.Format(time.RFC3339), mem.NamedDecisions, times)
	if r.OK {
		r.Detail = since + "; every voter's record has changed since: published"
	} else {
		r.Detail = fmt.Sprintf("%s; the records of %s have not changed since: held until every voter has written again", since, strings.Join(waiting, ", "))
	}
	return r
}

// tally carries the counters of the memory forward: a flap is a swap
// published at the previous decision (the same voter set) and not at this
// one; a verdict change is a host judged at both with different verdicts.
func tally(prev *Status, hosts []*host, d Decision, mem *Memory) {
	if prev == nil {
		return
	}
	mem.Flaps, mem.VerdictChanges = prev.Memory.Flaps, prev.Memory.VerdictChanges
	p := prev.Decision
	if p.Action == ActionSwap && !(d.Action == ActionSwap && d.Out == p.Out) && slices.Equal(prev.Memory.Voters, mem.Voters) {
		mem.Flaps++
	}
	was := map[string]Verdict{}
	for _, h := range prev.Hosts {
		was[h.Name] = h.Verdict
	}
	for _, h := range hosts {
		if v, ok := was[h.node.Name]; ok && v != "" && v != h.verdict {
			mem.VerdictChanges++
		}
	}
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
