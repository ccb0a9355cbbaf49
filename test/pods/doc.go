// Package pods is the scenario that runs fleet-role's manifests as real
// pods, from the image built from this checkout (lab/kit/image), on a one-node
// cluster of real components on this machine (lab/fleets/cluster: etcd as k3s runs
// it, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
// with runc, and a kubelet). It is harness: it checks what only running
// pods can show (the securityContext, host mounts, downward API, host
// network, probes, Pod Security labels, a kubelet-issued token), which the
// other tests can only read from the YAML.
//
// Run it alone, as root: hack/test.sh does (without the race detector, on
// its own), or go test -count=1 -v -timeout 30m ./test/pods/.
package pods
