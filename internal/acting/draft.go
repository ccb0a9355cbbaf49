package acting

import (
	"cmp"
	"fmt"
	"slices"
)

// Draft is the step table of the swap w's decision publishes, each step's
// guards judged as the cluster would stand once the steps before it are
// done; nil when the decision names no swap. It changes nothing: it is what
// acting plan publishes and what an approval approves.
func Draft(w World, mode string) *Plan {
	if w.Out == "" || w.In == "" {
		return leadDraft(w, mode)
	}
	xh, sh := w.host(w.Out), w.host(w.In)
	if xh == nil || sh == nil {
		return nil
	}
	p := &Plan{
		Kind: KindSwap,
		ID:   PlanID(xh.Name, xh.MemberID, sh.Name),
		Out:  Party{Node: xh.Name, MemberID: xh.MemberID, PeerURL: xh.PeerURL},
		In:   Party{Node: sh.Name, PeerURL: sh.PeerURL},
	}
	p.Standby = StandbyServer
	if !sh.Server {
		p.Standby = StandbyAgent
		p.Remedy = fmt.Sprintf("%s is a k3s agent: k3s cannot make it a voter without a reinstall as a server; reinstall it with `k3s server --server https://<a server>:6443 --disable-etcd` (docs/acting.md, \"An agent standby\")", sh.Name)
	}
	t0 := startTolerance(&w, p.Out.Node, p.In.Node)
	to := leaderTarget(&w, p)
	for _, n := range Steps {
		at := predict(w, p, n, to)
		st := Step{Name: n, State: StatePending, Actor: actorOf(n), Host: hostOf(n, p),
			Guards: guards(&at, n, p, t0, mode), Writes: writesOf(n, p, to), Deadline: deadline(w.Settings, n)}
		if n == StepMoveLeader && !xh.Leader {
			st.State, st.Writes = StateSkipped, nil
		}
		if st.Guards == nil {
			st.Guards = []Guard{}
		}
		p.Steps = append(p.Steps, st)
	}
	// The approval is the first guard: ready is every other.
	p.Ready = holds(p.Steps[0].Guards[1:])
	if !p.Ready {
		p.Steps[0].State = StateHeld
	}
	return p
}

// leadDraft is the leadership move off the voter the decision would
// replace for want of a fit standby, when that voter leads: its steps
// move-leader and done, the rest skipped. nil when there is none to draft.
func leadDraft(w World, mode string) *Plan {
	xh := w.host(w.LeadOut)
	if xh == nil || !xh.Voter || !xh.Leader || xh.MemberID == "" {
		return nil
	}
	p := &Plan{Kind: KindMoveLeader, ID: LeadPlanID(xh.Name, xh.MemberID),
		Out: Party{Node: xh.Name, MemberID: xh.MemberID, PeerURL: xh.PeerURL}}
	to := leaderTarget(&w, p)
	for _, n := range []StepName{StepMoveLeader, StepDone} {
		st := Step{Name: n, State: StatePending, Actor: actorOf(n), Host: hostOf(n, p), Guards: []Guard{}}
		if n == StepMoveLeader {
			st.Guards, st.Writes, st.Deadline = leadGuards(&w, p, mode, to), writesOf(n, p, to), deadline(w.Settings, n)
		}
		p.Steps = append(p.Steps, st)
	}
	p.Ready = holds(p.Steps[0].Guards[1:])
	if !p.Ready {
		p.Steps[0].State = StateHeld
	}
	return p
}

func actorOf(n StepName) Actor {
	switch n {
	case StepAdmit, StepPrewrite, StepMoveLeader, StepSettle:
		return ActorActuator
	case StepPromote:
		return ActorK3s
	}
	return ActorController
}

func hostOf(n StepName, p *Plan) string {
	switch n {
	case StepAdmit, StepPromote, StepStabilise:
		return p.In.Node
	}
	return p.Out.Node
}

// writesOf is what step n changes; to is the member move-leader hands
// etcd's leadership to.
func writesOf(n StepName, p *Plan, to string) []Write {
	x, s := p.Out.Node, p.In.Node
	switch n {
	case StepAdmit:
		return []Write{{Kind: WriteDropIn, Host: s, Path: DropInPath, Content: DropInVoter, Restart: true}}
	case StepPrewrite:
		return []Write{{Kind: WriteDropIn, Host: x, Path: DropInPath, Content: DropInStandby}}
	case StepMoveLeader:
		return []Write{{Kind: WriteMoveLeader, Host: x, Content: to}}
	case StepRemove:
		return []Write{{Kind: WriteAnnotation, Host: x, Path: RemoveAnnotation, Content: "true"}}
	case StepSettle:
		return []Write{{Kind: WriteRestart, Host: x, Restart: true}}
	}
	return nil
}

// leaderTarget is the member etcd's leadership goes to when X leads: a fit
// (but for its links to X), alive voter that stays and was a voter before the swap (the newcomer has
// held its vote for moments only), the first by name among equals; "" when
// none is known.
func leaderTarget(w *World, p *Plan) string {
	var c []*Host
	for i := range w.Hosts {
		h := &w.Hosts[i]
		if h.Voter && h.Name != p.Out.Node && h.Name != p.In.Node && h.fitBut(p.Out.Node) && h.Alive && h.MemberID != "" {
			c = append(c, h)
		}
	}
	if len(c) == 0 {
		return ""
	}
	return slices.MinFunc(c, func(a, b *Host) int { return cmp.Compare(a.Name, b.Name) }).MemberID
}

// predict is w as it would stand once the steps before n are done, each as
// the plan means it to end: the standby a learner once admitted, then an
// alive voter; leadership on to once moved; the leaving voter no member
// once removed. Each step's guards in the plan are judged on it.
func predict(w World, p *Plan, n StepName, to string) World {
	w.Hosts = slices.Clone(w.Hosts)
	i := stepIndex(n)
	if w.EtcdMembers > 0 {
		if i > stepIndex(StepAdmit) {
			w.EtcdMembers++
		}
		if i > stepIndex(StepRemove) {
			w.EtcdMembers--
		}
	}
	for k := range w.Hosts {
		h := &w.Hosts[k]
		switch {
		case h.Name == p.In.Node && i > stepIndex(StepPromote):
			h.Voter, h.Learner, h.Alive, h.EtcdLabel, h.NodeNamed = true, false, true, true, true
		case h.Name == p.In.Node && i > stepIndex(StepAdmit):
			h.Learner = true
		case h.Name == p.Out.Node && i > stepIndex(StepRemove):
			h.Voter, h.Learner, h.Leader, h.Alive = false, false, false, false
		}
		if i > stepIndex(StepMoveLeader) && to != "" {
			switch {
			case h.Name == p.Out.Node:
				h.Leader = false
			case h.MemberID == to:
				h.Leader = true
			}
		}
	}
	return w
}
