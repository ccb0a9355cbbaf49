// Package lab is the room of the bench, the tests and the demo, grouped by
// role:
//
//   - run: process runners, each a real component as a process: etcd
//     members (etcdproc), a kube-apiserver with RBAC and admission
//     (apiserver), fleet-role's own binary built from the checkout
//     (fleetbin), a Prometheus server (promserver), headless Chromium
//     (browser), and the processes a scenario starts with their output
//     kept (proc).
//   - fault: the faults injected on a host and between hosts: a slow disk
//     (slowdisk, a FUSE filesystem whose syncs sleep), a starved CPU
//     (cpulimit, a cgroup with a CPU quota), hosts in network namespaces
//     joined by delayed, lossy links (netlab), and the fault campaign that
//     draws faults from its catalogue and scores fleet-role's verdicts
//     against their truth (campaign).
//   - fleets: whole fleets formed on one machine: the mesh of real etcd
//     members and probes in namespaces (fleet), a one-node cluster with a
//     kubelet and containerd (cluster), real k3s servers and agents
//     (k3sfleet), and the demo's (demo, run by cmd/fleet-role-demo).
//   - kit: the test kit, what the tests check and build with: the probes'
//     and controller's harness on a real API server (testkit), the
//     host lock and environment (testenv), the tools' cache (toolcache),
//     the image (image), the status as the scenarios judge it
//     (statuscheck), one metrics scraper (metricscrape), the API server's
//     audit log (auditlog), the TCP ends the connect tests measure
//     (tcptest), in-memory doubles of internal/kube (kubefake),
//     the docs' shell steps (docsteps), and what a run leaves on the
//     machine (leftover, mountinfo, hostfs).
//   - cmd: every harness command, one directory each (the campaign, the
//     image builder, the demo's screenshot, the metrics recorder, the
//     voter-cpu experiment, and the image's pause and reach binaries).
//
// No product package imports it outside its tests.
package lab
