// Package actuator runs `fleet-role actuator` (internal/actuator, through
// internal/cli's MainContext) against a real kube-apiserver with
// deploy/fleet-role-acting.yaml applied (the actuator's RBAC and the
// admission policy that holds its record to its shape, its token bound to a
// Pod on its Node) and a real three-member etcd cluster: a journal the test
// writes as the controller, the controller's Lease, and the actuator's own
// record, with real etcd leadership moves and member removals, the drop-in
// written under a temporary host root, and k3s restarts asked of a
// stand-in supervisor over the lab's file protocol.
package actuator
