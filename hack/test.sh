#!/usr/bin/env bash
# Runs every test of fleet-role against the real components: it first builds
# or installs what the tests need (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, the kubelet and promtool from the
# Go module proxy, cached; fio, containerd, runc and the CNI plugins from
# Debian),
# then checks formatting, vets, and runs the unit, fuzz-seed, race and
# real-component tests.
set -euo pipefail
# Go and the tool cache need a home; a CI runner may start without $HOME.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

step "tools"
FLEET_ROLE_ETCD=$(hack/tools.sh etcd)
FLEET_ROLE_KUBE_APISERVER=$(hack/tools.sh kube-apiserver)
FLEET_ROLE_KUBE_CONTROLLER_MANAGER=$(hack/tools.sh kube-controller-manager)
hack/tools.sh fio >/dev/null
# test/pods runs the manifests as real pods: a kubelet and kube-scheduler
# (built like kube-apiserver), and containerd, runc and the CNI plugins
# (from Debian).
FLEET_ROLE_KUBELET=$(hack/tools.sh kubelet)
FLEET_ROLE_KUBE_SCHEDULER=$(hack/tools.sh kube-scheduler)
hack/tools.sh containerd
# promtool: internal/alerts runs `promtool check rules` and `promtool test rules`.
FLEET_ROLE_PROMTOOL=$(hack/tools.sh promtool)
export FLEET_ROLE_KUBELET FLEET_ROLE_KUBE_SCHEDULER FLEET_ROLE_PROMTOOL
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER FLEET_ROLE_KUBE_CONTROLLER_MANAGER
echo "etcd: $FLEET_ROLE_ETCD"
echo "kube-apiserver: $FLEET_ROLE_KUBE_APISERVER"
echo "kube-controller-manager: $FLEET_ROLE_KUBE_CONTROLLER_MANAGER"
echo "promtool: $FLEET_ROLE_PROMTOOL"
echo "fio: $(command -v fio) ($(fio --version))"

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt -l lists:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

# The end-to-end scenarios judge real latencies against etcd's limits (50 ms
# for a connect at etcd's own timing), so they run alone and without the race
# detector, whose slowdown on two cores would itself push a loopback connect
# past the limit. Every package they drive is raced in its own tests.
e2e="./lab/demo ./test/mesh ./test/pods" # each run below on its own
e2e_pattern='/lab/demo$|/test/mesh$|/test/pods$'
# The fsync reading's comparison with fio judges this disk's latencies the
# same way, so it too runs alone, after the raced packages, not beside them.
timed_tests='^TestMeasureAgreesWithFio$'

step "go test -race (every package but the end-to-end scenarios and $timed_tests)"
go test -race -count=1 -timeout 45m -skip "$timed_tests" "$@" $(go list ./... | grep -Ev "$e2e_pattern")

step "timing-judging tests, one at a time: $timed_tests, $e2e"
go test -count=1 -p 1 -v -run "$timed_tests" -timeout 30m "$@" ./internal/fsync
go test -count=1 -p 1 -timeout 30m "$@" ./lab/demo
# The mesh scenario runs verbose, so that the log shows each variant's
# figures (periods from the delay to the swap with the slow voter a follower
# and etcd's leader, the whole-fleet fault, the recoveries), not only "ok".
go test -count=1 -p 1 -v -timeout 30m "$@" ./test/mesh
# The pods scenario: the manifests as real pods from the image built from
# this checkout, on a one-node cluster with a kubelet and containerd (root);
# verbose, so that the log shows the host's readings in and out of the pod.
go test -count=1 -p 1 -v -timeout 30m "$@" ./test/pods
