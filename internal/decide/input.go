package decide

import (
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Input is everything one decision reads, the current time included.
type Input struct {
	Now      time.Time
	Settings settings.Settings
	Nodes    []Node
	// Entries is every probe record's entry: node name to entry text
	// (internal/record; the old shared fleet-role-probe ConfigMap's data
	// reads the same way).
	Entries map[string]string
	// Unreadable names the records that exist but cannot be read as
	// records (a second data key, binaryData, another node's owner): node
	// name to why. Such a host is unknown with that reason.
	Unreadable map[string]string
	// Previous is the last status published, or nil.
	Previous *Status
}

// Node is what the decision needs of one Kubernetes Node.
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
	// VoterSince: when k3s last turned this node's EtcdIsVoter condition
	// True (its lastTransitionTime); zero when unknown. A controller with no
	// previous status takes from it when the voter set formed. k3s writes
	// the condition some time after etcd promotes the member (about 30 s
	// on k3s v1.34.2, docs/k3s.md), so the date errs late, which lengthens
	// the cooldown and never shortens it.
	VoterSince time.Time
	// Created and UID are the Node's creationTimestamp and UID, which the
	// API server sets and no record can: the last tie-breaks between
	// voters exactly tied (replace.go) read them. Zero when unknown.
	Created time.Time
	UID     string
}
