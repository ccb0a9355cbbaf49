// Package mesh holds the end-to-end mesh scenario (TestMesh): three k3s-like
// servers, each a network namespace running a real etcd member, and a
// standby agent, with the real kube-apiserver on that etcd, fleet-role's
// manifests applied as an operator would, a probe process inside every host
// and the controller beside the API server. Each probe holds a token bound
// to a Pod on its own host's node, so that the admission policy holds it to
// its node's record, as in a cluster. It shows that fleet-role tells the
// truth about a real cluster: every host fit at first; a voter slowed at the
// network layer reported unfit with the swap named, both while it is a
// follower and while it is etcd's leader, and no healthy host reported as
// not reporting meanwhile; the same delay on every host named no swap; a
// paused voter left alone because its probe stopped reporting; and nothing
// in the cluster changed but fleet-role's status and the probes' records,
// each written only by its own component.
//
// It needs root (network namespaces) and the real etcd and kube-apiserver
// (hack/tools.sh); `go test ./test/mesh/` runs it alone in a few minutes.
package mesh
