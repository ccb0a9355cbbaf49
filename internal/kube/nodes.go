package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// NodesFromKube reads what the decision needs from Kubernetes Nodes: the
// etcd role, k3s's learner condition, the eligible and pinned labels of s,
// and the peer address.
func NodesFromKube(nodes []corev1.Node, s settings.Settings) []k3snode.Node {
	out := make([]k3snode.Node, 0, len(nodes))
	for _, k := range nodes {
		n := k3snode.Node{Name: k.Name, Voter: k.Labels[k3snode.EtcdRoleLabel] == "true"}
		v, marked := k.Labels[s.EligibleLabel]
		n.Eligible, n.EligibleMarked = v == "true", marked
		n.Pinned = k.Labels[s.PinnedLabel] == "true"
		for _, c := range k.Status.Conditions {
			if string(c.Type) != k3snode.EtcdIsVoterCondition {
				continue
			}
			if c.Status == corev1.ConditionFalse && c.Reason == k3snode.MemberIsLearner {
				n.Learner = true
			}
			if c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() && !c.LastHeartbeatTime.IsZero() {
				// Both times are k3s's clock, never compared with the
				// controller's; a heartbeat before the transition (two
				// servers' clocks) reads as a transition just made.
				n.VoterFor, n.VoterForKnown = max(0, c.LastHeartbeatTime.Sub(c.LastTransitionTime.Time)), true
			}
		}
		n.PeerAddress = PeerAddressOf(&k)
		n.Created, n.UID = k.CreationTimestamp.UTC(), string(k.UID)
		out = append(out, n)
	}
	return out
}

// NodeCanVote says whether k's host could take a vote at these settings: a
// voter (or learner), or a host marked eligible. The record of any other is
// counted and never read (Input.Unheld), so the controller's record cache
// need not hold it.
func NodeCanVote(k *corev1.Node, s settings.Settings) bool {
	return k.Labels[k3snode.EtcdRoleLabel] == "true" || k.Labels[s.EligibleLabel] == "true"
}

// NodeSelectors are the label selectors of the Nodes a probe or the
// controller needs: those NodeCanVote holds (a voter or learner, which k3s
// labels, or a host marked eligible) and, when fleet-role acts, k3s's
// servers (what acting reads of a Node). A Node none selects (an agent's)
// never reaches either: its kubelet's credentials may churn its labels at
// will, and each change would cost a decode of the whole Node
// (kube.NodeInformer).
func NodeSelectors(s settings.Settings) []string {
	sel := []string{k3snode.EtcdRoleLabel + "=true", s.EligibleLabel + "=true"}
	if s.Acting != settings.ActingOff {
		sel = append(sel, k3snode.ControlPlaneLabel+"=true")
	}
	return sel
}

// PeerAddressOf is the address k's etcd member is reached at: the
// annotation etcd.k3s.cattle.io/node-address, else the InternalIP.
func PeerAddressOf(k *corev1.Node) string {
	if a := k.Annotations[k3snode.NodeAddressAnnotation]; a != "" {
		return a
	}
	for _, a := range k.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// NodeView returns what a cache of Nodes keeps of each one for
// NodesFromKube: the name, the UID (a record's owner) and creation time, the resourceVersion
// (the cache's own), the three labels and the address annotation it reads
// (with the annotations named, which another reader of the same Nodes
// needs), k3s's EtcdIsVoter condition and the first InternalIP address. A
// real Node carries far more that nothing here reads: its images (up to 50
// names and sizes, as the kubelet reports them), a field set per writer,
// every condition and address, the kubelet's and k3s's annotations. Kept
// whole, the Nodes of a large cluster would be most of what a probe or the
// controller holds. The Node given is not changed: the view shares its
// strings, and copies its maps and lists.
func NodeView(s settings.Settings, annotations ...string) func(*corev1.Node) *corev1.Node {
	labels := []string{k3snode.EtcdRoleLabel, s.EligibleLabel, s.PinnedLabel}
	annotations = append([]string{k3snode.NodeAddressAnnotation}, annotations...)
	acts := s.Acting != settings.ActingOff
	if acts {
		// What acting reads of a Node (actingWorld).
		labels = append(labels, k3snode.ControlPlaneLabel)
		annotations = append(annotations, acting.RemoveAnnotation, acting.RemoveRequestedAnnotation, k3snode.NodeNameAnnotation, k3snode.RemovedNodeNameAnnotation, k3snode.NodeArgsAnnotation, k3snode.NodeEnvAnnotation)
	}
	return func(k *corev1.Node) *corev1.Node {
		v := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:              k.Name,
			UID:               k.UID,
			CreationTimestamp: k.CreationTimestamp,
			ResourceVersion:   k.ResourceVersion,
			Labels:            pick(k.Labels, labels),
			Annotations:       pick(k.Annotations, annotations),
		}}
		if acts {
			v.DeletionTimestamp = k.DeletionTimestamp
		}
		for _, c := range k.Status.Conditions {
			if string(c.Type) == k3snode.EtcdIsVoterCondition || (acts && c.Type == corev1.NodeReady) {
				kept := corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}
				if c.Type == k3snode.EtcdIsVoterCondition {
					// k3s writes it again every 5 minutes at most (its
					// heartbeatInterval), and it dates the voter set by
					// k3s's clock alone (NodesFromKube). The kubelet's
					// Ready heartbeats every 10 s and is read for its
					// status alone: kept, it would wake the informer.
					kept.LastHeartbeatTime = c.LastHeartbeatTime
				}
				v.Status.Conditions = append(v.Status.Conditions, kept)
			}
		}
		for _, a := range k.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				v.Status.Addresses = []corev1.NodeAddress{a}
				break
			}
		}
		return v
	}
}

// pick is the entries of m under keys, nil when there are none.
func pick(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}
