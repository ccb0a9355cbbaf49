package kube

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// LeadOut is the voter d would replace but for want of a fit standby: d
// is held back by its candidate step alone (no standby, or none fit), and
// its replace step names the voter. "" otherwise: a gate that holds the
// swap holds a leadership move too.
func LeadOut(d status.Decision) string {
	r, ok := d.DecidingStep()
	if !ok || (r.Code != status.CodeNoStandby && r.Code != status.CodeNoFitStandby) {
		return ""
	}
	for _, r := range d.Reasons {
		if r.OK && (r.Code == status.CodeMostSlowLinks || r.Code == status.CodeFurthestOverLimits) {
			return r.Subject
		}
	}
	return ""
}

// actingWorld is what acting reads, gathered from the decision and the
// Nodes (as NodeView keeps them with acting on). Each host's etcd
// role and member are the decision's, from its record; its Node says what
// k3s made of it.
func actingWorld(st *status.Status, nodes []corev1.Node, s settings.Settings, now time.Time, read *ActingRead) acting.World {
	w := acting.World{Now: now, Settings: s}
	if read != nil {
		w.Approved, w.SteadySince = read.Approved, read.SteadySince
	}
	if st.Decision.Action == status.ActionSwap {
		w.Out, w.In = st.Decision.Out, st.Decision.In
	} else {
		w.LeadOut = LeadOut(st.Decision)
	}
	for _, r := range st.Decision.Reasons {
		if r.Code == status.CodeFleetWideFault {
			w.FleetWide = true
		}
	}
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	for _, h := range st.Hosts {
		a := acting.Host{Name: h.Name, Voter: h.Role == status.RoleVoter, Learner: h.Role == status.RoleLearner, Verdict: string(h.Verdict),
			LinksOnly: linksOnly(h)}
		if m := h.Member; m != nil {
			a.MemberID, a.Leader = m.ID, m.Leader
			// Alive by etcd's own gauge, on a record fresh and full enough
			// to be judged.
			a.Alive = m.HasLeader && h.Verdict != status.Unknown
			if m.NoSpace {
				w.Alarms++
			}
		}
		if n := byName[h.Name]; n != nil {
			fromNode(&a, n, s)
			if a.Removed {
				// k3s removed the member; its Node keeps the etcd label
				// until k3s restarts there.
				a.Voter, a.Learner = false, false
			}
			if a.Voter && !etcdIsVoter(n) {
				// k3s labels a server's Node an etcd one when its member
				// joins, before its leader promotes it, and its probe says
				// it is a learner only at its next sample: acting counts a
				// member a voter once k3s's own condition says so too, so
				// that no step takes a learner for a voter.
				a.Voter, a.Learner = false, true
			}
		}
		if read != nil {
			a.Report = read.Reports[h.Name]
		}
		if m := h.Member; m != nil && a.Voter && a.Alive {
			w.EtcdMembers = max(w.EtcdMembers, m.KnownMembers)
		}
		w.Hosts = append(w.Hosts, a)
	}
	return w
}

// linksOnly is, for an unfit host, the hosts whose links to it are all
// that fails (its connects and etcd's round trips to them); nil when any
// other judgement fails.
func linksOnly(h status.Host) []string {
	if h.Verdict != status.Unfit {
		return nil
	}
	var to []string
	for _, r := range h.Reasons {
		if r.OK {
			continue
		}
		if (r.Signal != status.SignalConnect && r.Signal != status.SignalPeerRTT) || r.Subject == "" {
			return nil
		}
		if !slices.Contains(to, r.Subject) {
			to = append(to, r.Subject)
		}
	}
	return to
}

// etcdIsVoter: k3s's EtcdIsVoter condition on n is True.
func etcdIsVoter(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if string(c.Type) == k3snode.EtcdIsVoterCondition {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// fromNode fills in what a's Node says.
func fromNode(a *acting.Host, n *corev1.Node, s settings.Settings) {
	a.Server = n.Labels[k3snode.ControlPlaneLabel] == "true"
	a.EtcdLabel = n.Labels[k3snode.EtcdRoleLabel] == "true"
	a.Deleting = n.DeletionTimestamp != nil
	a.RemoveAnnotation = n.Annotations[acting.RemoveAnnotation] == "true"
	a.RemoveRequested = n.Annotations[acting.RemoveRequestedAnnotation]
	_, a.NodeNamed = n.Annotations[k3snode.NodeNameAnnotation]
	a.Removed = n.Annotations[k3snode.RemovedNodeNameAnnotation] != "" && !a.NodeNamed
	a.Joined = joined(n.Annotations)
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			a.Ready = c.Status == corev1.ConditionTrue
		}
	}
	if addr := PeerAddressOf(n); addr != "" {
		a.PeerURL = "https://" + net.JoinHostPort(addr, strconv.Itoa(s.PeerPort))
	}
}

// joined reports whether k3s runs with --server, by its Node's node-args
// (its config files' keys included) or K3S_URL in its node-env.
func joined(ann map[string]string) bool {
	var args []string
	if json.Unmarshal([]byte(ann[k3snode.NodeArgsAnnotation]), &args) == nil && slices.Contains(args, "--server") {
		return true
	}
	var env map[string]string
	return json.Unmarshal([]byte(ann[k3snode.NodeEnvAnnotation]), &env) == nil && env["K3S_URL"] != ""
}

// ActingRead is what a controller that acts read beside the decision and
// the Nodes: the operator's approval, the actuators' reports by node, and
// since when the decision has published the same swap without a break.
type ActingRead struct {
	Approved    string
	Reports     map[string]*acting.Report
	SteadySince time.Time
}

// WithActing adds to st what acting makes of it: with acting plan, guided
// or auto, the published swap's step table; off, nothing, so that the
// document stays what it was before acting existed. nodes are the Nodes st
// was decided on, as NodeView keeps them; read is nil unless the
// controller acts. It returns the world the plan was drawn on, for the
// executor.
func WithActing(st *status.Status, nodes []corev1.Node, s settings.Settings, now time.Time, read *ActingRead) acting.World {
	if s.Acting == settings.ActingOff {
		return acting.World{}
	}
	w := actingWorld(st, nodes, s, now, read)
	st.Acting = &acting.Status{Mode: s.Acting, Plan: acting.Draft(w, s.Acting)}
	return w
}
