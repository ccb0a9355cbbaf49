package acting

import (
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// GuardCode names a guard; tools and the executor steer by it, never by
// its detail.
type GuardCode string

// Guards (docs/acting.md, "Guards").
const (
	GuardApproval          GuardCode = "approval"           // the operator approved this plan ID (guided), or it was published steadily for a window (auto)
	GuardStandbyServer     GuardCode = "standby_server"     // S is a k3s server with etcd disabled
	GuardLearners          GuardCode = "learners"           // no learner but the swap's own
	GuardMembers           GuardCode = "members"            // the member count the step expects
	GuardRemoveAnnotations GuardCode = "remove_annotations" // no remove annotation but the swap's own
	GuardNodesDeleting     GuardCode = "nodes_deleting"     // no server Node being deleted
	GuardAlarms            GuardCode = "alarms"             // no etcd alarm
	GuardOpenSwap          GuardCode = "open_swap"          // no other swap open
	GuardCooldown          GuardCode = "swap_cooldown"      // since the last swap ended
	GuardSwapsPerDay       GuardCode = "swaps_per_day"      // swaps in the last 24 hours
	GuardStandbyFit        GuardCode = "standby_fit"        // S fit against the voters that stay
	GuardVotersAlive       GuardCode = "voters_alive"       // every voter alive by etcd's own gauges
	GuardFleetWide         GuardCode = "fleet_wide"         // no cause shared by the whole fleet
	GuardNodeNames         GuardCode = "node_names"         // every etcd Node named to its member
	GuardJoined            GuardCode = "joined"             // the leaving voter joined with --server
	GuardToleranceOpt      GuardCode = "tolerance_optimistic"
	GuardToleranceFloor    GuardCode = "tolerance_floor"
	GuardLeaderTarget      GuardCode = "leader_target" // a fit voter, alive, to hand etcd's leadership to
)

// Guard is one condition a step needs, in the shape of the decision's
// reasons: the value against the limit, in unit, by rule, on basis.
type Guard struct {
	Code   GuardCode     `json:"code"`
	Value  *float64      `json:"value"`
	Limit  *float64      `json:"limit"`
	Unit   string        `json:"unit,omitempty"`
	Rule   settings.Rule `json:"rule,omitempty"`
	Basis  string        `json:"basis"`
	OK     bool          `json:"ok"`
	Detail string        `json:"detail,omitempty"`
	// age: Value is a time since something, which grows with every
	// decision; WithoutAges leaves it out.
	age bool
}

// Host is what acting knows of one host.
type Host struct {
	Name string
	// Voter and Learner: its etcd member's role; neither for a host with
	// no member.
	Voter, Learner bool
	// Verdict is the decision's: "fit", "unfit" or "unknown".
	Verdict string
	// LinksOnly, for an unfit host, names the hosts whose links to it are
	// all that fails; nil when any other judgement fails. A host unfit only
	// by its links to the leaving voter is fit for the fleet the swap
	// makes, as the decision judges a candidate and counts the tolerance.
	LinksOnly []string
	// Server: a k3s server (the control-plane role label); EtcdLabel: k3s
	// labels it an etcd server.
	Server, EtcdLabel bool
	MemberID, PeerURL string
	// Leader: its etcd member leads (etcd_server_is_leader).
	Leader bool
	// Alive: its record is fresh and its etcd member has a leader
	// (etcd_server_has_leader), etcd's own word that it takes part.
	Alive bool
	// Deleting: its Node has a deletion timestamp.
	Deleting bool
	// RemoveAnnotation: its Node carries k3s's remove annotation "true".
	RemoveAnnotation bool
	// Ready: its Node's Ready condition is True.
	Ready bool
	// RemoveRequested is the plan ID fleet-role's own annotation beside
	// k3s's remove annotation names (RemoveRequestedAnnotation): k3s's
	// member controller deletes only its own, so a request it refused is
	// told from one never made.
	RemoveRequested string
	// Report is what the host's actuator last did; nil for none.
	Report *Report
	// NodeNamed: k3s annotated the Node with its member's name
	// (etcd.k3s.cattle.io/node-name); only meaningful with EtcdLabel.
	NodeNamed bool
	// Joined: k3s runs with --server (its k3s.io/node-args say so), so a
	// removed member rejoins the cluster rather than starting a new one.
	Joined bool
	// Removed: k3s's member controller recorded this Node's member removed
	// (etcd.k3s.cattle.io/removed-node-name names its member), while its
	// etcd label stays until k3s restarts on it.
	Removed bool
}

// World is everything the plan and the executor read, the time included.
type World struct {
	Now      time.Time
	Settings settings.Settings
	Hosts    []Host
	// Alarms counts etcd's active alarms (NOSPACE, CORRUPT) any member
	// reports.
	Alarms int
	// FleetWide: the decision found a cause shared by the whole fleet.
	FleetWide bool
	// Out and In are the swap the decision publishes; both empty for none.
	Out, In string
	// LeadOut is the voter the decision would replace when it names no
	// swap only for want of a fit standby: if it leads, a leadership move
	// off it is drafted instead (KindMoveLeader).
	LeadOut string
	// SteadySince is when the decision began to publish this same swap
	// without a break.
	SteadySince time.Time
	// LastSwapEnded is when the last swap ended (done or aborted); zero
	// when none did. SwapsDay counts those that started in the last 24 h.
	LastSwapEnded time.Time
	SwapsDay      int
	// Approved is the plan ID the operator approved, empty for none.
	Approved string
	// EtcdMembers is how many members etcd has as its alive voters know
	// them (etcd_network_known_peers, the largest count); 0 when none
	// said. On k3s a learner's Node carries no etcd label until it is
	// promoted, so this is how a learner, or a member added and never
	// started, is seen at all.
	EtcdMembers int
}

// labelled counts the members the Nodes show: voters and learners.
func (w *World) labelled() int {
	n := 0
	for i := range w.Hosts {
		if w.Hosts[i].Voter || w.Hosts[i].Learner {
			n++
		}
	}
	return n
}

// unlabelled is how many members etcd has beyond those the Nodes show:
// learners (whose Nodes k3s labels only once promoted) or members added
// and never started.
func (w *World) unlabelled() int { return max(0, w.EtcdMembers-w.labelled()) }

// fitBut reports whether h is fit once out has left: fit, or unfit only by
// its links to out.
func (h *Host) fitBut(out string) bool {
	if h.Verdict == "fit" {
		return true
	}
	if h.Verdict != "unfit" || len(h.LinksOnly) == 0 {
		return false
	}
	for _, l := range h.LinksOnly {
		if l != out {
			return false
		}
	}
	return true
}

func (w *World) host(name string) *Host {
	for i := range w.Hosts {
		if w.Hosts[i].Name == name {
			return &w.Hosts[i]
		}
	}
	return nil
}

func num(v float64) *float64 { return &v }

func count(code GuardCode, v, limit int, rule settings.Rule, unit, basis, detail string) Guard {
	l := settings.Limit{Value: float64(limit), Rule: rule}
	return Guard{Code: code, Value: num(float64(v)), Limit: num(float64(limit)), Unit: unit, Rule: rule,
		Basis: basis, OK: l.OK(float64(v)), Detail: detail}
}

func yes(code GuardCode, ok bool, basis, detail string) Guard {
	return Guard{Code: code, Basis: basis, OK: ok, Detail: detail}
}

// quorum is etcd's quorum of n voting members, floor(n/2)+1.
func quorum(n int) int { return n/2 + 1 }

// tolerance is how many more of voters may fail before etcd loses quorum,
// counting the unknown as lost, and the unfit too unless optimistic, but
// for those unfit only by their links to out, the leaving voter (decide's
// FailureTolerance, over a voter set the swap would make).
func tolerance(voters []*Host, out string, optimistic bool) int {
	lost := 0
	for _, h := range voters {
		if h.Verdict == "unknown" || (!optimistic && !h.fitBut(out)) {
			lost++
		}
	}
	return max(0, len(voters)-lost-quorum(len(voters)))
}

// votersAfter is the voter set once step n is done: S votes from promote
// on, X no longer from remove on.
func votersAfter(w *World, out, in string, n StepName) []*Host {
	var vs []*Host
	for i := range w.Hosts {
		h := &w.Hosts[i]
		switch {
		case h.Name == in:
			if stepIndex(n) >= stepIndex(StepPromote) {
				vs = append(vs, h)
			}
		case h.Name == out:
			if stepIndex(n) < stepIndex(StepRemove) {
				vs = append(vs, h)
			}
		case h.Voter:
			vs = append(vs, h)
		}
	}
	return vs
}

func stepIndex(n StepName) int {
	for i, s := range Steps {
		if s == n {
			return i
		}
	}
	return -1
}

// startTolerance is the failure tolerance, unfit voters counted as lost,
// when the swap begins: no step may leave less.
func startTolerance(w *World, out, in string) int {
	var vs []*Host
	for i := range w.Hosts {
		if w.Hosts[i].Voter {
			vs = append(vs, &w.Hosts[i])
		}
	}
	return tolerance(vs, out, false)
}

const (
	basisOneChange = "one membership change at a time: etcd allows one learner, and k3s, cluster-etcd-operator and Cluster API change one member per round"
	basisTolerance = "add first: with the unfit voter holding, one more voter may fail at every step (docs/acting.md, \"Why add first\")"
	basisFloor     = "no step leaves fewer voters able to fail, the unfit counted as lost, than when the swap began"
)

// guards are the conditions step n needs, judged on w as it would stand
// once the steps before n are done; t0 is the tolerance at the start.
func guards(w *World, n StepName, p *Plan, t0 int, mode string) []Guard {
	s := w.Settings
	out, in := p.Out.Node, p.In.Node
	var gs []Guard
	learners, annotations, deleting, alive, voters := w.unlabelled(), 0, 0, 0, 0
	if sh := w.host(in); sh != nil && !sh.Voter && !sh.Learner && learners > 0 && n == StepPromote {
		// The newcomer is the learner etcd knows and its Node does not show.
		learners--
	}
	for i := range w.Hosts {
		h := &w.Hosts[i]
		if h.Learner && h.Name != in {
			learners++
		}
		if h.RemoveAnnotation {
			annotations++
		}
		if h.Deleting && h.Server {
			deleting++
		}
		if h.Voter {
			voters++
			if h.Alive {
				alive++
			}
		}
	}
	after := votersAfter(w, out, in, n)
	tolerances := func() {
		gs = append(gs,
			count(GuardToleranceOpt, tolerance(after, out, true), 1, settings.AtLeast, "voters", basisTolerance,
				fmt.Sprintf("after %s, %d of %d voters may fail with the unfit holding", n, tolerance(after, out, true), len(after))),
			count(GuardToleranceFloor, tolerance(after, out, false), t0, settings.AtLeast, "voters", basisFloor,
				fmt.Sprintf("after %s, %d of %d voters may fail with the unfit lost; %d when the swap began", n, tolerance(after, out, false), len(after), t0)))
	}
	aliveGuard := func() {
		gs = append(gs, count(GuardVotersAlive, alive, voters, settings.AtLeast, "voters",
			"every voter alive by etcd's own gauges (has a leader, record fresh): etcd 3.6.5, which k3s v1.34.2 embeds, adds even a learner only while the serving member has been connected to every voter for 5 s (etcdserver/server.go:1431); a dead voter is the operator's (docs/acting.md, \"A dead voter\")",
			fmt.Sprintf("%d of %d voters alive", alive, voters)))
	}
	members := func(want int) {
		got := max(w.labelled(), w.EtcdMembers)
		gs = append(gs, count(GuardMembers, got, want, settings.Equal, "members", basisOneChange,
			fmt.Sprintf("%d etcd members (%d on the Nodes, %d as etcd's voters know them), %d expected before %s", got, w.labelled(), w.EtcdMembers, want, n)))
	}
	switch n {
	case StepAdmit:
		gs = append(gs, approval(w, p, mode))
		sh := w.host(in)
		server := sh != nil && sh.Server && !sh.EtcdLabel
		gs = append(gs, yes(GuardStandbyServer, server,
			"k3s makes a voter only of a server: an agent needs a reinstall, and a server with etcd disabled joins etcd as a learner when restarted without it",
			standbyDetail(sh)))
		gs = append(gs, yes(GuardStandbyFit, sh != nil && sh.fitBut(out),
			"the standby is judged against the voters that stay, as the decision judged it: its links to the leaving voter do not count", verdictDetail(in, out, sh)))
		gs = append(gs, count(GuardLearners, learners, 0, settings.AtMost, "learners", basisOneChange, fmt.Sprintf("%d learners (on the Nodes, or members etcd knows and no Node shows)", learners)))
		members(s.TargetVoters)
		gs = append(gs, count(GuardRemoveAnnotations, annotations, 0, settings.AtMost, "nodes", basisOneChange,
			fmt.Sprintf("%d Nodes carry %s", annotations, RemoveAnnotation)))
		gs = append(gs, count(GuardNodesDeleting, deleting, 0, settings.AtMost, "nodes", basisOneChange,
			fmt.Sprintf("%d server Nodes are being deleted", deleting)))
		unnamed, joined := 0, false
		for i := range w.Hosts {
			if h := &w.Hosts[i]; h.EtcdLabel && !h.NodeNamed {
				unnamed++
			}
		}
		if xh := w.host(out); xh != nil {
			joined = xh.Joined
		}
		gs = append(gs, count(GuardNodeNames, unnamed, 0, settings.AtMost, "nodes",
			"k3s's etcd leader matches learners to Nodes by etcd.k3s.cattle.io/node-name and, with an etcd Node unnamed beside an unstarted learner, reads past the member's client URLs (pkg/etcd/etcd.go:1276-1291): no learner while one is unnamed",
			fmt.Sprintf("%d etcd Nodes lack etcd.k3s.cattle.io/node-name", unnamed)))
		gs = append(gs, yes(GuardJoined, joined,
			"a removed member restarted without --server starts a cluster of its own (pkg/etcd/etcd.go:497-499): the leaving voter must be one that joined, never the --cluster-init server",
			joinedDetail(out, joined)))
		gs = append(gs, count(GuardAlarms, w.Alarms, 0, settings.AtMost, "alarms",
			"no membership change while etcd raises an alarm (cluster-etcd-operator's rule: no change while a member is unhealthy)",
			fmt.Sprintf("%d etcd alarms", w.Alarms)))
		gs = append(gs, yes(GuardFleetWide, !w.FleetWide,
			"a cause the whole fleet shares is not fixed by moving one vote", fleetWideDetail(w.FleetWide)))
		gs = append(gs, paceGuards(w)...)
		aliveGuard()
		tolerances()
	case StepPromote:
		// k3s promotes on its own; what fleet-role can still refuse is a
		// second learner beside S.
		gs = append(gs, count(GuardLearners, learners, 0, settings.AtMost, "learners", basisOneChange, fmt.Sprintf("%d learners beside the standby", learners)))
		tolerances()
	case StepPrewrite:
		sh := w.host(in)
		gs = append(gs, yes(GuardStandbyFit, sh != nil && sh.fitBut(out) && sh.Voter,
			"the standby holds its vote, fit but for its links to the leaving voter, before the leaving voter is told to go", verdictDetail(in, out, sh)))
		aliveGuard()
	case StepMoveLeader:
		aliveGuard()
		tolerances()
	case StepRemove:
		gs = append(gs, count(GuardLearners, learners, 0, settings.AtMost, "learners", basisOneChange, fmt.Sprintf("%d learners", learners)))
		members(s.TargetVoters + 1)
		gs = append(gs, count(GuardRemoveAnnotations, annotations, 0, settings.AtMost, "nodes", basisOneChange,
			fmt.Sprintf("%d Nodes carry %s", annotations, RemoveAnnotation)))
		aliveGuard()
		tolerances()
	}
	return gs
}

// paceGuards are the cooldown since the last swap or leadership move
// ended, and the daily cap: what keeps a judgement that flaps from
// churning the fleet.
func paceGuards(w *World) []Guard {
	var gs []Guard
	if !w.LastSwapEnded.IsZero() {
		since := w.Now.Sub(w.LastSwapEnded)
		gs = append(gs, Guard{Code: GuardCooldown, Value: num(since.Seconds()), Limit: num(SwapCooldown.Seconds()), Unit: "seconds",
			Rule: settings.AtLeast, OK: since >= SwapCooldown, age: true,
			Basis:  "an hour between swaps: Cluster API's control plane waits as long (MinHealthyPeriod) before it remediates again",
			Detail: fmt.Sprintf("the last swap ended at %s", w.LastSwapEnded.UTC().Format(time.RFC3339))})
	}
	return append(gs, count(GuardSwapsPerDay, w.SwapsDay, MaxSwapsPerDay(w.Settings), settings.Under, "swaps",
		"at most target_voters swaps in 24 hours: no more than there are votes, so that a judgement that flaps cannot churn one vote all day",
		fmt.Sprintf("%d swaps began in the last 24 hours", w.SwapsDay)))
}

// leadGuards are what a leadership move needs before it begins: the
// approval, a voter to hand the leadership to, the pace of swaps, every
// voter alive, and no cause the whole fleet shares. It changes no
// membership, so no tolerance guard applies.
func leadGuards(w *World, p *Plan, mode, to string) []Guard {
	gs := []Guard{approval(w, p, mode)}
	target := "none: no voter but the leader is fit, alive and known by its member ID"
	if h := w.memberHost(to); h != nil {
		target = h.Name
	}
	gs = append(gs, yes(GuardLeaderTarget, to != "",
		"etcd's leadership goes to a fit voter that is alive (etcd's MoveLeader takes only a voter); the first by name among equals",
		"target: "+target))
	gs = append(gs, paceGuards(w)...)
	alive, voters := 0, 0
	for i := range w.Hosts {
		if h := &w.Hosts[i]; h.Voter {
			voters++
			if h.Alive {
				alive++
			}
		}
	}
	gs = append(gs, count(GuardVotersAlive, alive, voters, settings.AtLeast, "voters",
		"every voter alive by etcd's own gauges (has a leader, record fresh): a leadership handed to a voter cut off is handed back by the next election",
		fmt.Sprintf("%d of %d voters alive", alive, voters)))
	gs = append(gs, yes(GuardFleetWide, !w.FleetWide,
		"a cause the whole fleet shares is not fixed by moving the leadership", fleetWideDetail(w.FleetWide)))
	return gs
}

func (w *World) memberHost(id string) *Host {
	for i := range w.Hosts {
		if id != "" && w.Hosts[i].MemberID == id {
			return &w.Hosts[i]
		}
	}
	return nil
}

func approval(w *World, p *Plan, mode string) Guard {
	basis := "acting guided carries out a swap once an operator approves its plan ID (kubectl fleet-role approve); acting auto once it was published steadily for a window"
	switch mode {
	case settings.ActingGuided:
		return yes(GuardApproval, w.Approved == p.ID, basis, approvalDetail(w.Approved, p.ID))
	case settings.ActingAuto:
		need := time.Duration(w.Settings.Window) * w.Settings.SamplePeriod
		since := time.Duration(0)
		if !w.SteadySince.IsZero() {
			since = w.Now.Sub(w.SteadySince)
		}
		return Guard{Code: GuardApproval, Value: num(since.Seconds()), Limit: num(need.Seconds()), Unit: "seconds",
			Rule: settings.AtLeast, OK: since >= need, age: true, Basis: basis,
			Detail: fmt.Sprintf("the same swap published without a break since %s; window x sample_period = %v", w.SteadySince.UTC().Format(time.RFC3339), need)}
	}
	return yes(GuardApproval, false, basis, "acting is "+mode+": nothing is carried out")
}

func approvalDetail(approved, id string) string {
	switch approved {
	case id:
		return "approved"
	case "":
		return "not approved: kubectl fleet-role approve " + id
	}
	return fmt.Sprintf("the approval names %s, not this plan", approved)
}

func standbyDetail(h *Host) string {
	switch {
	case h == nil:
		return "the standby has no Node"
	case h.EtcdLabel:
		return "the standby already runs etcd"
	case !h.Server:
		return "the standby is a k3s agent: reinstall it as a server with disable-etcd (docs/acting.md, \"An agent standby\")"
	}
	return "a k3s server with etcd disabled"
}

func verdictDetail(name, out string, h *Host) string {
	if h == nil {
		return name + " has no Node"
	}
	role := "standby"
	if h.Voter {
		role = "voter"
	}
	if h.Verdict == "unfit" && h.fitBut(out) {
		return fmt.Sprintf("%s is unfit as a %s only by its links to %s, the voter leaving", name, role, out)
	}
	return fmt.Sprintf("%s is %s as a %s", name, h.Verdict, role)
}

func joinedDetail(out string, joined bool) string {
	if joined {
		return out + " runs k3s with --server"
	}
	return out + " runs k3s without --server (the first server, or its arguments are unknown): hand the swap to the operator (docs/acting.md, \"The first server\")"
}

func fleetWideDetail(shared bool) string {
	if shared {
		return "the decision found a cause the whole fleet shares"
	}
	return "no cause the whole fleet shares"
}

// holds reports whether every guard holds.
func holds(gs []Guard) bool {
	for _, g := range gs {
		if !g.OK {
			return false
		}
	}
	return true
}

// firstFailed is the first guard that does not hold, or "".
func firstFailed(gs []Guard) GuardCode {
	for _, g := range gs {
		if !g.OK {
			return g.Code
		}
	}
	return ""
}
