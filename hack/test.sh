#!/usr/bin/env bash
# Runs every test of fleet-role against the real components: it first builds
# or installs what the tests need (etcd, kube-apiserver,
# kube-controller-manager and promtool from the Go module proxy, cached; fio
# from Debian),
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
# promtool: internal/alerts runs `promtool check rules` and `promtool test rules`.
FLEET_ROLE_PROMTOOL=$(hack/tools.sh promtool)
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER FLEET_ROLE_KUBE_CONTROLLER_MANAGER FLEET_ROLE_PROMTOOL
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
e2e="./internal/demo ./test/mesh" # each run below on its own
e2e_pattern='/internal/demo$|/test/mesh$'

step "go test -race (every package but the end-to-end scenarios)"
go test -race -count=1 -timeout 45m "$@" $(go list ./... | grep -Ev "$e2e_pattern")

step "end-to-end scenarios, one at a time: $e2e"
go test -count=1 -p 1 -timeout 30m "$@" ./internal/demo
# The mesh scenario runs verbose, so that the log shows each variant's
# figures (periods from the delay to the swap with the slow voter a follower
# and etcd's leader, the whole-fleet fault, the recoveries), not only "ok".
go test -count=1 -p 1 -v -timeout 30m "$@" ./test/mesh
