#!/usr/bin/env bash
# Runs every test of fleet-role against the real components: it first builds
# or installs what the tests need (etcd, promtool, the Prometheus server and helm
# from the Go module proxy, cached; k3s
# from its source kept beside the checkout, and with it, from k3s's own
# Kubernetes, kube-apiserver, kube-controller-manager, kube-scheduler and the
# kubelet, cached; fio, containerd, runc, the CNI plugins and Chromium from
# Debian),
# then checks formatting, vets, and runs the unit, fuzz-seed, race and
# real-component tests.
set -euo pipefail
# Go and the tool cache need a home; a CI runner may start without $HOME.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

# No test reads its binary's debug information (stack traces come from the
# line tables, which stay), so the compiles of every go command here and in
# the tests' own builds write none: about a tenth less CPU in each compile
# (docs/testing.md). And go test runs no vet of its own (-vet=off): the go
# vet step below runs every analyzer go test's vet would, over the same
# packages and their tests, so go test's would vet every package a second
# time (in a cold run with the warm-up not vetting for it, the four pure
# packages alone took 85 CPU seconds more).
# A GOFLAGS of the caller's comes first; these replace the same flags in it.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false -vet=off"

step "tools"
# test/k3s runs fleet-role on real k3s, built from the k3s source kept
# beside the checkout (../shared/k3s; hack/tools.sh k3s says what it needs),
# and the API-server, pods and mesh tests run the Kubernetes commands k3s
# embeds, built into the same binary (tools/k3s; hack/tools.sh says why). The largest
# build (about 880 MB of modules cold; 16.7 minutes of wall time on 2 cores
# beside the other tools), it runs in the
# background beside the others, so that its module downloads and its
# single-threaded link overlap their compiles instead of leaving a core
# idle; a warm run finds it cached at once. In a session of its own, so that
# a failure elsewhere stops its go build too.
k3s_path=$(mktemp)
setsid hack/tools.sh k3s >"$k3s_path" &
k3s_build=$!
trap 'kill -- -"$k3s_build" 2>/dev/null || true; rm -f "$k3s_path"' EXIT
# Go's build cache for the vet and race steps, filled beside the tools: the
# k3s build's module downloads and single-threaded links and the apt-get
# installs leave a core idle for minutes of a cold run, and vet and the race
# step's first compile took minutes after it (go vet 1 min 43 s; docs/testing.md).
# At the lowest priority, so that it takes only what the tool builds leave.
# It vets, and compiles every package and test package the steps take (`go
# list -test -export` runs each compile and stores it in the cache, as `go
# test` would), but links nothing: `go test` links its test binary anew
# every time (the build cache keeps no test executable), so a link here
# would be done twice. Its output is thrown away: the steps below compile,
# vet and run everything again and report whatever fails. A warm run finds
# it all cached in seconds.
prewarm() {
  go vet ./... || true
  go list -test -export -race $(go list ./... | grep -Ev "$e2e_pattern|$pure_pattern") >/dev/null || true
  go list -test -export $(go list ./... | grep -E "$pure_pattern|$e2e_pattern|$timed_pattern") >/dev/null || true
  # The release's three platforms, compiled as hack/release.sh and
  # lab/kit/image build them (CGO_ENABLED=0, -trimpath), and the image tool
  # the release runs: hack's and lab/kit/image's tests both build them, and
  # with the race step's packages two a core they could compile them at
  # the same time (about 75 CPU seconds a platform, cold).
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go list -export -trimpath ./cmd/fleet-role >/dev/null || true
  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go list -export -trimpath ./cmd/fleet-role >/dev/null || true
  CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 go list -export -trimpath ./cmd/fleet-role >/dev/null || true
  go list -export ./lab/cmd/fleet-role-image >/dev/null || true
}
# The end-to-end scenarios and the fsync comparison judge real latencies, so
# they run after the raced packages, alone (hack/timed-tests.sh says why).
e2e_pattern='/lab/fleets/demo$|/test/mesh$|/test/pods$|/test/k3s$|/test/acting$'
# The decision core, the entry format, the quantiles and the settings are
# pure: no goroutine in their code, none in their tests but a benchmark's
# heap sampler, no state but sync.Once and sync.Map caches. The race
# detector still instruments them inside every raced package that calls
# them from several goroutines (the controller, the probe, the CLI); their
# own tests, among the slowest under it (decide and entry about 70 s each),
# run without it. A goroutine in their code ends that.
pure_pattern='/internal/(decide|entry|quantile|settings)$'
# The packages of the timing-judging tests below, which hack/timed-tests.sh
# runs again without the race detector.
timed_pattern='/test/integration/(fsync|wakeup)$|/lab/fault/(slowdisk|cpulimit)$'
# setsid makes a session, and with the kernel's autogroups (on by default
# in Debian's kernel) every session is scheduled as one group whatever its
# processes' nice: the group's own nice is what keeps it behind the tool
# builds (measured: at nice 0 it took as much CPU as the k3s build). The
# warm-up sets it from inside, once setsid has made the group: set from
# here, it could land on this script's group before the child's setsid.
setsid nice -n 19 bash -c "{ echo 19 >/proc/self/autogroup; } 2>/dev/null; $(declare -f prewarm); e2e_pattern='$e2e_pattern' pure_pattern='$pure_pattern' timed_pattern='$timed_pattern' prewarm" >/dev/null 2>&1 &
prewarm_pid=$!
trap 'kill -- -"$k3s_build" -"$prewarm_pid" 2>/dev/null || true; rm -f "$k3s_path"' EXIT
FLEET_ROLE_ETCD=$(hack/tools.sh etcd)
hack/tools.sh fio >/dev/null
# test/pods runs the manifests as real pods: a kubelet and kube-scheduler
# (built with k3s), and containerd, runc and the CNI plugins (from Debian).
hack/tools.sh containerd
# promtool: test/integration/alerts runs `promtool check rules` and `promtool test rules`.
FLEET_ROLE_PROMTOOL=$(hack/tools.sh promtool)
# The demo's run checks the shipped alerts in a real Prometheus (built from
# promtool's module) and the controller's status page in Debian's Chromium.
FLEET_ROLE_PROMETHEUS=$(hack/tools.sh prometheus)
hack/tools.sh chromium >/dev/null
# helm: deploy's chart tests render and install the chart with it.
FLEET_ROLE_HELM=$(hack/tools.sh helm)
# lab/kit/image runs the image's arm64 and arm/v7 binaries under Debian's
# qemu-user-static.
hack/tools.sh qemu
if ! wait "$k3s_build"; then echo "hack/tools.sh k3s failed (its messages are above)" >&2; exit 1; fi
# The warm-up's compiles would only compete with the steps' own from here.
wait "$prewarm_pid" || true
FLEET_ROLE_K3S=$(cat "$k3s_path")
FLEET_ROLE_KUBE_APISERVER=$(hack/tools.sh kube-apiserver)
FLEET_ROLE_KUBE_CONTROLLER_MANAGER=$(hack/tools.sh kube-controller-manager)
FLEET_ROLE_KUBELET=$(hack/tools.sh kubelet)
FLEET_ROLE_KUBE_SCHEDULER=$(hack/tools.sh kube-scheduler)
export FLEET_ROLE_K3S
export FLEET_ROLE_KUBELET FLEET_ROLE_KUBE_SCHEDULER FLEET_ROLE_PROMTOOL FLEET_ROLE_PROMETHEUS FLEET_ROLE_HELM
export FLEET_ROLE_ETCD FLEET_ROLE_KUBE_APISERVER FLEET_ROLE_KUBE_CONTROLLER_MANAGER
echo "etcd: $FLEET_ROLE_ETCD"
echo "kube-apiserver: $FLEET_ROLE_KUBE_APISERVER"
echo "kube-controller-manager: $FLEET_ROLE_KUBE_CONTROLLER_MANAGER"
echo "kubelet: $FLEET_ROLE_KUBELET"
echo "kube-scheduler: $FLEET_ROLE_KUBE_SCHEDULER"
echo "promtool: $FLEET_ROLE_PROMTOOL"
echo "k3s: $FLEET_ROLE_K3S ($("$FLEET_ROLE_K3S" --version | head -n 1))"
echo "prometheus: $FLEET_ROLE_PROMETHEUS"
echo "helm: $FLEET_ROLE_HELM ($("$FLEET_ROLE_HELM" version --short))"
echo "chromium: $(command -v chromium) ($(chromium --version 2>/dev/null))"
echo "fio: $(command -v fio) ($(fio --version))"

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt -l lists:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

timed_tests='^(TestMeasureAgreesWithFio|TestFioSeesTheDelay|TestQuotaStarvesABusyLoop|TestStarvedProcessWakesLate)$'

if started=$(grep -nE '^\s*go (func|[A-Za-z_][A-Za-z0-9_.]*\()' internal/{decide,entry,quantile,settings}/*.go | grep -v '_test\.go:'); then
  echo "a package run without the race detector starts a goroutine; run it raced (take it out of pure_pattern):" >&2
  echo "$started" >&2
  exit 1
fi

# The raced packages' tests wait more than they compute: each mostly waits
# on a real etcd, API server or process it started, using about a third to
# two thirds of a core (the controller's tests, now test/integration/controller:
# 54 CPU seconds in 104 s alone).
# At go test's default of one package a core, the step left 37% of the CPU
# idle (390 s, 480 CPU seconds busy and 284 idle, warm, on 2 cores); at two
# a core, 9% (313 s). None of these judges timing (those run alone, below).
race_p=$((2 * $(nproc)))

# Every step below runs whatever failed before it, and the failed ones are
# listed at the end: one run of CI then says all that fails, not the first.
failed=()

# The longest packages first (go test starts them in the order given):
# started last, the slowest (about 200 s each raced) ran on after the rest
# had ended, with cores idle. By their times in the race step at 9bd1424
# (controller 221 s, deploy 198, cli 183, probe 133, image 110, hack 85,
# campaign 73, kube 65; the next, bench, 44). cli's and probe's tests on a
# real API server, etcd and root, which took those times, are now
# test/integration/cli's and test/integration/probe's.
slowest='test/integration/controller deploy test/integration/cli test/integration/probe lab/kit/image hack lab/fault/campaign test/integration/kube'
module=$(go list -m)
raced=$(go list ./... | grep -Ev "$e2e_pattern|$pure_pattern")
first=""
for p in $slowest; do
  if grep -qx "$module/$p" <<<"$raced"; then first+="$module/$p "; raced=$(grep -vx "$module/$p" <<<"$raced"); fi
done
raced="$first$raced"

step "go test -race -p $race_p (every package but the pure ones, the end-to-end scenarios and $timed_tests)"
go test -race -count=1 -p "$race_p" -timeout 45m -skip "$timed_tests" "$@" $raced || failed+=("go test -race")

step "go test (the pure packages, without the race detector)"
go test -count=1 -timeout 45m "$@" $(go list ./... | grep -E "$pure_pattern") || failed+=("go test (the pure packages)")

step "timing-judging tests, one at a time"
hack/timed-tests.sh "$@" || failed+=("the timing-judging tests (their failed steps are listed above)")

if [ ${#failed[@]} -gt 0 ]; then
  step "failed"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
