// Package actuator is fleet-role's per-host actuator: what only a k3s server
// itself can do for a swap, one command of the journal at a time
// (docs/acting.md; internal/acting holds the journal, its commands and the
// report the actuator gives back).
//
// The deciding part is pure (Decide): the journal, the Lease's term, the
// actuator's local state and the report its record holds go in; out comes
// one typed Decision: nothing to do, a report to publish, a refusal with a
// stable Code, or one Action. The adapters around it read the journal (a
// watch of its one ConfigMap), the Lease, the local etcd member (its gRPC
// gateway, JSON over HTTPS with k3s's client certificate), write the k3s
// drop-in under the host's root, restart k3s (systemd on a real host, a
// file protocol with the lab's supervisor), keep the local state file and
// write the report record. Time comes from one injected clock.
//
// A (PlanID, Seq) is carried out at most once: the local state records a
// command before it starts and when it ends, so that an actuator restarted
// mid-command reports it interrupted rather than doing it twice, and one
// restarted after it reports it done.
package actuator
