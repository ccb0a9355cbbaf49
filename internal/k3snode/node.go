// Package k3snode holds what fleet-role reads of the fleet's Kubernetes
// Nodes before it judges any host: each Node's etcd role, its labels and
// its peer address (Node), and the labels, annotations and conditions k3s
// writes on its Nodes that they are read from. The probe and the decision
// read the same Node; the Kubernetes adapter (internal/kube) fills it in.
package k3snode

import "time"

// What k3s writes on its nodes (docs/facts.md, "k3s").
const (
	// EtcdRoleLabel marks every k3s server with embedded etcd ("true").
	EtcdRoleLabel = "node-role.kubernetes.io/etcd"
	// NodeAddressAnnotation is the address k3s's etcd advertises for peers.
	NodeAddressAnnotation = "etcd.k3s.cattle.io/node-address"
	// NodeNameAnnotation is the etcd member's name k3s writes on its Node
	// (pkg/etcd/etcd.go NodeNameAnnotation); its leader matches learners
	// to Nodes by it.
	NodeNameAnnotation = "etcd.k3s.cattle.io/node-name"
	// RemovedNodeNameAnnotation names the member k3s's member controller
	// removed from this Node's etcd; it deletes NodeNameAnnotation then,
	// and k3s sets that again when the host rejoins under a new name
	// (pkg/etcd/member_controller.go:94-101, seen in test/acting).
	RemovedNodeNameAnnotation = "etcd.k3s.cattle.io/removed-node-name"
	// NodeArgsAnnotation is the k3s command line, as k3s writes it on its
	// Node (a JSON list, its config files' keys among the flags).
	NodeArgsAnnotation = "k3s.io/node-args"
	// NodeEnvAnnotation is k3s's K3S_* environment, as k3s writes it on its
	// Node (a JSON object; K3S_URL stands for --server).
	NodeEnvAnnotation = "k3s.io/node-env"
	// ControlPlaneLabel marks a k3s server.
	ControlPlaneLabel = "node-role.kubernetes.io/control-plane"
	// EtcdIsVoterCondition is k3s's node condition; False with reason
	// MemberIsLearner marks a learner.
	EtcdIsVoterCondition = "EtcdIsVoter"
	MemberIsLearner      = "MemberIsLearner"
)

// Node is what fleet-role needs of one Kubernetes Node.
type Node struct {
	Name string
	// Voter: the label node-role.kubernetes.io/etcd=true.
	Voter bool
	// Learner: k3s's condition EtcdIsVoter False/MemberIsLearner.
	Learner bool
	// Eligible and Pinned: the settings' labels read "true".
	Eligible, Pinned bool
	// EligibleMarked: the eligible label is present at all.
	EligibleMarked bool
	// PeerAddress: the annotation etcd.k3s.cattle.io/node-address, else the
	// InternalIP.
	PeerAddress string
	// VoterFor: how long this node had been a voter when k3s last wrote
	// its EtcdIsVoter condition True: the condition's lastHeartbeatTime less
	// its lastTransitionTime, both by k3s's clock, so that no reader
	// compares k3s's clock with its own (0 when the heartbeat reads before
	// the transition). VoterForKnown is false when the condition is not
	// True or lacks either time. A controller with no previous status dates
	// the voter set from it: the transition came VoterFor before the
	// heartbeat, and the heartbeat came no later than now, so now less
	// VoterFor errs late by the heartbeat's age (k3s writes it again every
	// 5 minutes, pkg/etcd/etcd.go's heartbeatInterval) and never early.
	// k3s also writes the condition some time after etcd promotes the
	// member (about 30 s on k3s v1.34.2, docs/k3s.md): it too errs late,
	// which lengthens the cooldown and never shortens it.
	VoterFor      time.Duration
	VoterForKnown bool
	// Created and UID are the Node's creationTimestamp and UID, which the
	// API server sets and no record can: the last tie-breaks between
	// voters exactly tied (replace.go) read them. Zero when unknown.
	Created time.Time
	UID     string
}
