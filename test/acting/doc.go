// Package acting holds the tests of fleet-role's acting mode on real k3s
// (lab/fleets/k3sfleet): k3s servers with embedded etcd and a
// control-plane-only standby server, each host in its own namespaces with
// its own containerd.
//
// TestActingK3sMechanics carries out the swap of docs/acting.md with the
// harness alone, making exactly the writes fleet-role's actuator and
// controller would make (the drop-in at acting.DropInPath, a k3s restart
// requested through the lab's restart protocol, MoveLeader on the leaving
// voter's own member with k3s's client certificate, k3s's remove
// annotation on the leaving voter's Node), and holds, through an observer
// independent of fleet-role (lab/kit/quorumwatch), that k3s carries each
// step out as the design relies on (docs/acting.md and the research notes
// it rests on): the standby joins as a learner and is promoted, the
// leaving voter is removed and comes back control-plane only, one
// membership change is in flight at a time, never two learners, no
// acknowledged write is lost, and a quorum of voters always has a leader
// but for less than one election timeout. Its subtest holds that a voter
// whose standby drop-in is pre-written leaves etcd, rather than rejoining,
// when k3s restarts unplanned.
//
// It needs root and the host lock (it takes it; by hand, run it as
// flock /tmp/fleet-role-host.lock go test -count=1 -v -timeout 40m ./test/acting).
// hack/test.sh leaves it out of the race step.
package acting
