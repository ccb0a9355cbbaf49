// Package acting runs the controller's side of acting against a real
// kube-apiserver (on a real etcd) with deploy/fleet-role-acting.yaml applied
// and real RBAC and admission: the bounds the install puts on each new
// power (only the controller writes the journal; it annotates only the
// journal's leaving voter, while the swap runs; each actuator writes only
// its own record; only an approver approves), and `fleet-role approve`.
// test/acting carries a swap out on real k3s.
package acting
