#!/usr/bin/env bash
# Runs the tests that judge real latencies, one at a time and without the
# race detector: the fsync reading against fio, the slow disk against fio, a
# CPU quota against a busy loop, the wake-up reading of a starved process,
# then the end-to-end scenarios (the demo, the mesh with acting on k3s
# beside it, the pods, k3s).
#
#   hack/timed-tests.sh [host|cluster] [go test flags]
#
# host runs those of one host, which need etcd, fio, Prometheus and Chromium
# (the fsync reading, the slow disk, the quota, the wake-up reading, the
# demo); cluster those that need the Kubernetes commands and k3s (acting
# and the mesh, the pods, k3s); neither word runs both, as hack/test.sh does after the
# raced packages; bench/busy.sh runs both again beside a busy loop on each
# core.
# It expects the tools in the environment as hack/test.sh exports them
# (FLEET_ROLE_ETCD and the rest); the other arguments pass to every `go test`.
#
# The end-to-end scenarios judge real latencies against etcd's limits (50 ms
# for a connect at etcd's own timing), so they run alone and without the race
# detector, whose slowdown on two cores would itself push a loopback connect
# past the limit. Every package they drive is raced in its own tests. The
# fsync reading's comparison with fio judges this disk's latencies the same
# way, so it too runs alone, not beside other packages' tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# failed lists the steps whose tests failed. A failed step does not stop the
# ones after it: each judges something of its own, and a CI run that stopped
# at the first would say nothing of the rest until the next run (the fsync
# comparison failing first on 2026-12-05 left all eight others unrun).
failed=()
current=""
step() { current="$*"; printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

# gotest runs go test with its arguments. When it fails, it ends with the
# test files' own last lines (their errors and the figures logged before
# them), since a failing scenario's last output is its hosts' logs, and a
# reader who sees only the tail of a run (a CI summary) would otherwise see
# no reason at all; and it counts the step as failed.
gotest() {
  local log rc=0
  log=$(mktemp)
  go test "$@" 2>&1 | tee "$log" || rc=$?
  judged "$log" "$rc" "$current"
  rm -f "$log"
}

# judged records step $3 as failed when its go test exited $2 non-zero, with
# the last lines its tests wrote themselves from log $1.
judged() {
  if [ "$2" != 0 ]; then
    printf '\n== what failed (%s): the last lines the tests wrote themselves\n' "$3"
    grep -E '^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: ' "$1" | tail -n 25 | cut -c1-400 || true
    failed+=("$3")
  fi
}

# host_tests: the timing-judging tests of one host (etcd, fio, Prometheus,
# Chromium; no Kubernetes).
host_tests() {
  step "fsync reading against fio"
  # The steps before wrote gigabytes in a cold run (Go's module and build
  # caches, the tools): their writeback to this disk would share it with
  # the fsyncs the test times. Drained first (a cold run at 6b05a3f read
  # native/fio 2.25 here, and 1.27 run again alone minutes later).
  sync
  gotest -count=1 -p 1 -v -run '^TestMeasureAgreesWithFio$' -timeout 30m "$@" ./test/integration/fsync
  # The slow disk's delay as fio reads it, and the CPU share a quota leaves a
  # busy loop: both judge real latencies and shares against measured noise.
  step "the slow disk against fio"
  gotest -count=1 -p 1 -v -run '^TestFioSeesTheDelay$' -timeout 10m "$@" ./lab/fault/slowdisk
  step "a CPU quota against a busy loop"
  gotest -count=1 -p 1 -v -run '^TestQuotaStarvesABusyLoop$' -timeout 10m "$@" ./lab/fault/cpulimit
  # The wake-up reading (the wakeup_late signal) of a process starved by a
  # quota, against its own reading unstarved: it judges timing.
  step "a starved process's wake-up lateness"
  gotest -count=1 -p 1 -v -run '^TestStarvedProcessWakesLate$' -timeout 10m "$@" ./test/integration/wakeup
  step "the demo"
  gotest -count=1 -p 1 -timeout 30m "$@" ./lab/fleets/demo
}

# cluster_tests: the end-to-end scenarios that run Kubernetes and k3s.
cluster_tests() {
  # Acting on real k3s (test/acting's guided swaps, about 14 minutes, most
  # of it waiting on k3s and on the decision's windows and cooldown) runs
  # beside the mesh (about 12), which leaves a core and more idle: its
  # formed fleet takes about 0.4 of a core, and its etcd members write to
  # memory, not to the disk the mesh's members fsync. The mesh starts only
  # once acting's fleet is formed and fleet-role's pods run (the file the
  # test writes then): four k3s starting take both cores for a minute,
  # which the mesh's timing must not share. Its log is printed after the
  # mesh's.
  step "acting on k3s, beside the mesh (its log follows the mesh's)"
  local acting_log formed acting_pid acting_rc=0
  acting_log=$(mktemp)
  formed=$(mktemp -u)
  FLEET_ROLE_ACTING_FORMED_FILE=$formed go test -count=1 -p 1 -v -timeout 45m -run '^TestActingGuidedSwap$' "$@" ./test/acting >"$acting_log" 2>&1 &
  acting_pid=$!
  # Until the fleet is formed, or the test has ended (failed before it):
  # its own timeout bounds the wait.
  while [ ! -e "$formed" ] && kill -0 "$acting_pid" 2>/dev/null; do sleep 1; done
  # The mesh scenario runs verbose, so that the log shows the campaign's round
  # fault by fault and its table (periods from each fault to its swap, the
  # recoveries), not only "ok".
  step "the mesh"
  gotest -count=1 -p 1 -v -timeout 50m "$@" ./test/mesh
  step "acting on k3s: its log"
  wait "$acting_pid" || acting_rc=$?
  cat "$acting_log"
  judged "$acting_log" "$acting_rc" "acting on k3s"
  rm -f "$acting_log" "$formed"
  # The pods scenario: the manifests as real pods from the image built from
  # this checkout, on a one-node cluster with a kubelet and containerd (root);
  # verbose, so that the log shows the host's readings in and out of the pod.
  step "the pods"
  gotest -count=1 -p 1 -v -timeout 30m "$@" ./test/pods
  # The k3s scenario: fleet-role installed on real k3s (three servers with
  # embedded etcd and an agent, each host with its own containerd) through
  # k3s's manifests directory and configuration drop-ins; verbose, so that the
  # log shows what k3s wrote on its Nodes and served, and each fault's figures.
  # It takes the host lock itself (test/pods is the other holder).
  step "k3s"
  gotest -count=1 -p 1 -v -timeout 30m "$@" ./test/k3s
}

case "${1:-}" in
  host) shift; host_tests "$@" ;;
  cluster) shift; cluster_tests "$@" ;;
  *) host_tests "$@"; cluster_tests "$@" ;;
esac
if [ "${#failed[@]}" != 0 ]; then
  printf '\n== failed: %d of the timing-judging steps\n' "${#failed[@]}"
  printf -- '- %s\n' "${failed[@]}"
  exit 1
fi
