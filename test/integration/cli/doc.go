// Package cli runs fleet-role's commands (internal/cli) against real
// components: check etcd on a real etcd cluster; the probe and the
// controller, as processes of the built binary and through MainContext, and
// status, on a real kube-apiserver with deploy/fleet-role.yaml applied and
// real RBAC; and prepare-fsync-dir giving a directory to another user,
// which needs root.
package cli
