#!/usr/bin/env bash
# Runs fleet-role's fault campaign (docs/campaign.md): a real fleet on this
# machine, faults drawn from a seed, every published decision scored.
#
#   hack/campaign.sh --seed N --faults K --voters 3|5 --out DIR
#
# It builds etcd and kube-apiserver when they are not built yet (hack/tools.sh,
# cached), builds fleet-role and the runner from this checkout, and runs as
# root (network namespaces, FUSE mounts, cgroups). `--help` lists every flag.
set -euo pipefail
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$(dirname "$0")/.."

bin=$(mktemp -d "${TMPDIR:-/tmp}/fleet-role-campaign-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
etcd=$(hack/tools.sh etcd)
kas=$(hack/tools.sh kube-apiserver)
go build -o "$bin/fleet-role" ./cmd/fleet-role
go build -o "$bin/campaign" ./lab/cmd/campaign
# Not exec: the trap removes the binaries when the campaign ends. The runner
# handles SIGINT and SIGTERM itself (it undoes the fault and removes what it
# made); the shell passes them on.
"$bin/campaign" --fleet-role "$bin/fleet-role" --etcd "$etcd" --kube-apiserver "$kas" \
  --manifest deploy/fleet-role.yaml "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -rf "$bin"' INT TERM
wait "$pid"
