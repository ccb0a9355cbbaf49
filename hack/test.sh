#!/usr/bin/env bash
# Runs every test of fleet-role against the real components: it first builds
# or installs what the tests need (etcd and kube-apiserver from the Go module
# proxy, cached; fio from Debian), then checks formatting, vets, and runs the
# unit, fuzz-seed, race and real-component tests.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

step "tools"
FLEET_ROLE_ETCD=$(hack/tools.sh etcd)
FLEET_ROLE_KUBE_APISERVER=$(hack/tools.sh kube-apiserver)
hack/tools.sh fio >/dev/null
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER
echo "etcd: $FLEET_ROLE_ETCD"
echo "kube-apiserver: $FLEET_ROLE_KUBE_APISERVER"
echo "fio: $(command -v fio) ($(fio --version))"

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt -l lists:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

step "go test -race"
go test -race -count=1 -timeout 45m "$@" ./...
