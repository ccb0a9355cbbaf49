#!/usr/bin/env bash
# Runs the README's test command beside a busy loop on each core, then the
# tests that judge real latencies (hack/timed-tests.sh) again, until they have
# passed the given number of times in a row that way (default 3: the one in
# the test command and two more). It shows that those tests do not depend on
# the machine being idle: a busy loop is what a host's other work looks like
# to the scheduler at its worst, a core's whole time wanted by a process of
# the same priority.
#
#   bench/busy.sh            # about an hour on 2 cores with the tools built
#   bench/busy.sh -rounds 1  # the test command alone beside the loops
#   bench/busy.sh -campaign --seed N --faults K --voters 3|5 --out DIR
#                            # the fault campaign beside the loops instead
#                            # (hack/campaign.sh; docs/campaign.md)
#
# It stops at the first failure, with its log. Each step's log and the
# machine's load go to /tmp/fleet-role-busy/; the summary to standard output.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
campaign=()
while [ $# -gt 0 ]; do
  case "$1" in
    -rounds)
      [ $# -ge 2 ] || { echo "bench/busy.sh: -rounds needs a number" >&2; exit 2; }
      rounds="$2"; shift 2 ;;
    # Everything after -campaign is the campaign's own flags.
    -campaign) shift; campaign=("$@"); [ ${#campaign[@]} -gt 0 ] || campaign=(--help); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench/busy.sh: unknown argument $1 (want -rounds N, or -campaign and the campaign's flags)" >&2; exit 2 ;;
  esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "bench/busy.sh: -rounds $rounds: want a whole number of at least 1" >&2; exit 2 ;; esac

logs=/tmp/fleet-role-busy
mkdir -p "$logs"
cores=$(nproc)
pids=()
stop_loops() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_loops EXIT
for _ in $(seq "$cores"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "busy loops: ${#pids[@]} (one per core), pids ${pids[*]}"

run() { # name command...
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== $name ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
  if ! "$@" >"$logs/$name.log" 2>&1; then
    echo "FAILED: $name after $(( $(date +%s) - t0 )) s; its log: $logs/$name.log"
    tail -40 "$logs/$name.log"
    exit 1
  fi
  echo "   passed in $(( $(date +%s) - t0 )) s (load $(cut -d' ' -f1-3 /proc/loadavg)); log $logs/$name.log"
}

if [ ${#campaign[@]} -gt 0 ]; then
  # The campaign prints its progress and its table itself: to the terminal
  # as well as to the log.
  echo "== campaign ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)): hack/campaign.sh ${campaign[*]}"
  t0=$(date +%s)
  set +e
  hack/campaign.sh "${campaign[@]}" 2>&1 | tee "$logs/campaign.log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "the campaign ended with exit code $rc after $(( $(date +%s) - t0 )) s beside $cores busy loops (load $(cut -d' ' -f1-3 /proc/loadavg)); log $logs/campaign.log"
  exit "$rc"
fi

run test-command hack/test.sh
# The test command exported the tools' paths to its own children only.
FLEET_ROLE_ETCD=$(hack/tools.sh etcd)
FLEET_ROLE_KUBE_APISERVER=$(hack/tools.sh kube-apiserver)
FLEET_ROLE_KUBE_CONTROLLER_MANAGER=$(hack/tools.sh kube-controller-manager)
FLEET_ROLE_KUBELET=$(hack/tools.sh kubelet)
FLEET_ROLE_KUBE_SCHEDULER=$(hack/tools.sh kube-scheduler)
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER FLEET_ROLE_KUBE_CONTROLLER_MANAGER FLEET_ROLE_KUBELET FLEET_ROLE_KUBE_SCHEDULER
for i in $(seq 2 "$rounds"); do
  run "timed-tests-$i" hack/timed-tests.sh
done
echo "the test command passed beside $cores busy loops, and the timing-judging tests $rounds times in a row"
