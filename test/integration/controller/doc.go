// Package controller runs the controller against a real kube-apiserver (on a
// real etcd) with deploy/fleet-role.yaml applied and real RBAC: its status,
// its writes, its election between replicas, the settings it follows live, a
// crafted record and a deleted status.
package controller
