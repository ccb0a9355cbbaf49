// Package lab is the room of the bench, the tests and the demo: what starts
// real etcd members (etcdproc), a kube-apiserver (apiserver), a one-node
// cluster with a kubelet and containerd (cluster), a fleet of real k3s
// servers and agents, each host with its containerd (k3sfleet), and hosts
// in network namespaces with delays (netlab), and runs their processes
// (proc), checking what they leave on the machine (hostfs); the
// faults the campaign injects on a host beside the network's: a slow disk
// (slowdisk, a FUSE filesystem whose syncs sleep) and a starved CPU
// (cpulimit, a cgroup with a CPU quota), named so that a crashed run's
// leftovers can be swept (leftover) and shown gone (mountinfo); what
// builds the tools and the image (toolcache, image); and what drives the
// product's code from tests (testenv, probetest, statuscheck, auditlog,
// which reads an API server's audit log, fleetbin, which builds
// cmd/fleet-role and runs it, and kubefake's in-memory doubles of
// internal/kube) and from the demo (demo, run by cmd/fleet-role-demo).
// No product package imports it outside its tests.
package lab
