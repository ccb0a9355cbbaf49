// Package probe runs internal/probe's loops against a real kube-apiserver
// (on a real etcd) with deploy/fleet-role.yaml applied and real RBAC, each
// probe with a token of its own: ten probes writing at once, the real host
// sampler against a real etcd member, a restart's resumed window, a node
// that stops being eligible, a record deleted with its Node by the real
// garbage collector, and the probe failing closed without the admission
// policy. The loops run on a fake clock stepped a period at a time
// (lab/kit/testkit's Clocked), as internal/probe's own tests run theirs in
// memory.
package probe
