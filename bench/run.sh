#!/usr/bin/env bash
# Measures fleet-role on this machine and prints one table (bench/cmd/bench):
# a probe sample beside the shell route, the probe's and the controller's
# memory, the etcd WAL bytes per sample of real probe processes on per-host
# records at 10 and 50 hosts, the fsync reading beside fio, one decision at
# 5/50/500 hosts, the entry footprint, and the demo's detection time. Builds
# or installs what it runs against first (etcd and kube-apiserver with
# hack/tools.sh, fio, jq and curl with apt-get), as hack/test.sh does.
#
#   bench/run.sh                      # about 20 minutes on 2 cores
#   bench/run.sh -clean-windows 10    # adds the clean run: ten 50 s windows, each with a
#                                     # three-period stall of every etcd member and probe
#   bench/run.sh -write docs/performance.md   # also updates the docs page
#   bench/run.sh -only-wal            # the etcd WAL measurement alone, about 2 minutes
#
# Any flag of bench/cmd/bench passes through (go run ./bench/cmd/bench -h).
set -euo pipefail
cd "$(dirname "$0")/.."

FLEET_ROLE_ETCD=$(hack/tools.sh etcd)
FLEET_ROLE_KUBE_APISERVER=$(hack/tools.sh kube-apiserver)
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER
hack/tools.sh fio >/dev/null
missing=()
for tool in jq curl; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "missing ${missing[*]}; installing needs root: apt-get install -y ${missing[*]}" >&2; exit 1; fi
  echo "installing ${missing[*]} with apt-get" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v kubectl >/dev/null || { echo "kubectl is not on PATH" >&2; exit 1; }

exec go run ./bench/cmd/bench "$@"
