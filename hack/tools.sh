#!/usr/bin/env bash
# Builds (once, cached by version) the real components fleet-role's tests run
# against, and prints where they are. Nothing is downloaded but Go modules
# from the module proxy and Debian's packages.
#
#   hack/tools.sh etcd            -> path of the etcd v3.6.15 server binary
#   hack/tools.sh kube-apiserver  -> path of k3s's kube-apiserver v1.34.2+k3s1
#   hack/tools.sh kube-controller-manager -> path of k3s's kube-controller-manager v1.34.2+k3s1
#   hack/tools.sh kubelet         -> path of k3s's kubelet v1.34.2+k3s1
#   hack/tools.sh kube-scheduler  -> path of k3s's kube-scheduler v1.34.2+k3s1
#                                    (the four and k3s are one binary, tools/k3s)
#   hack/tools.sh containerd      -> installs containerd, runc and the CNI plugins
#                                    from Debian when absent; prints what it installed
#   hack/tools.sh fio             -> path of fio, installed with apt-get when absent
#   hack/tools.sh promtool        -> path of Prometheus' promtool v0.316.0 (rules checks and unit tests)
#   hack/tools.sh k3s             -> path of k3s v1.34.2+k3s1, built from the source kept beside
#                                    the checkout (../shared/k3s, or $FLEET_ROLE_K3S_SRC)
#   hack/tools.sh prometheus      -> path of the Prometheus server v0.316.0 (the live alert test)
#   hack/tools.sh chromium        -> path of Debian's Chromium, installed with apt-get when absent
#   hack/tools.sh qemu            -> installs Debian's qemu-user-static when absent (the arm builds run under it)
#   hack/tools.sh helm            -> path of Helm v4.3.2 (the chart's tests: deploy/chart)
set -euo pipefail
# Go and the tool cache need a home; a CI runner may start without $HOME.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${FLEET_ROLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleet-role}
mkdir -p "$cache/bin"

etcd_version=v3.6.15
promtool_version=v0.316.0 # github.com/prometheus/prometheus, Prometheus 3.16
helm_version=v4.3.2       # helm.sh/helm/v4
k3s_version=v1.34.2+k3s1
k3s_commit=8dac81b2
k3s_tarball=k3s-$k3s_version-$k3s_commit-src.tar.gz

# Every tool is linked stripped (-s -w), so the debug information its
# packages' compiles would write is thrown away at the link: -dwarf=false
# leaves it unwritten. The code is the same; the compiles take about a tenth
# less CPU (measured on the etcd build from an empty build cache: 88 to 97 s
# of user time against 106, docs/testing.md).
nodwarf='all=-dwarf=false'

# The tools are built without -trimpath, as this module's own packages are
# compiled by go vet and go test: -trimpath is part of every compile's key in
# Go's build cache, and without it helm, promtool and the Prometheus server
# reuse the compiles of the packages they share with this module (the
# Kubernetes API types and client, gRPC, protobuf: 33 of helm's 47 MB of Go
# source, 36 of Prometheus' 56), compiled once in a cold run instead of three
# times. Their go.mod files select the same version of every module whose
# packages two of them compile (TestToolModulesShareVersions holds it; a
# version apart anywhere below a package makes it and all above it compile
# again). No test reads a tool's file paths, which is all -trimpath changes.
build() { # name version dir [ldflags] [package] [go build flags]
  local name=$1 version=$2 dir=$3 ldflags=${4:-} pkg=${5:-.} flags=${6:-}
  local out="$cache/bin/$name-$version"
  # One build at a time per tool: a second caller waits and then finds it built.
  exec 9>"$cache/bin/.$name.lock"  # lab/kit/toolcache takes the same lock
  flock 9
  if [ ! -x "$out" ]; then
    echo "building $name $version (cached in $out; the first build takes minutes)" >&2
    (cd "$top/$dir" && go build -gcflags="$nodwarf" $flags -ldflags "$ldflags" -o "$out.tmp" "$pkg") >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# promtool and the Prometheus server come from one module (tools/promtool)
# and one `go build`: they share every package of rules, PromQL and the TSDB,
# and one build lets one's link overlap the other's last compiles instead of
# leaving a core idle between two builds. Asking for one builds both the
# first time; each is cached under its own name.
prom() { # promtool|prometheus
  local c missing=0 tmp
  exec 9>"$cache/bin/.prometheus.lock"
  flock 9
  for c in promtool prometheus; do
    [ -x "$cache/bin/$c-$promtool_version" ] || missing=1
  done
  if [ "$missing" = 1 ]; then
    echo "building promtool and prometheus $promtool_version (cached in $cache/bin; the first build takes minutes)" >&2
    tmp=$(mktemp -d "$cache/bin/.prometheus.XXXXXX")
    # remove_all_sd leaves out Prometheus' service discovery plugins (the
    # cloud SDKs: about half of the build), which neither rules checks nor
    # the live alert test (static targets) use; without the builtinassets
    # tag the server serves no web UI, which the test does not read (it
    # reads /api/v1).
    if ! (cd "$top/tools/promtool" && go build -tags=remove_all_sd -gcflags="$nodwarf" -ldflags "-s -w" -o "$tmp/" \
        github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus) >&2; then
      rm -rf "$tmp"; exit 1
    fi
    for c in promtool prometheus; do mv "$tmp/$c" "$cache/bin/$c-$promtool_version"; done
    rmdir "$tmp"
  fi
  echo "$cache/bin/$1-$promtool_version"
}

# containerd, runc and the CNI plugins (bridge, host-local, portmap in
# /usr/lib/cni) are what test/pods runs pods with. Debian packages them all;
# crun is not used: it refuses this kind of host's hybrid cgroups.
containerd_tools() {
  local missing=() pkg
  command -v containerd >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} with apt-get" >&2
    if [ "$(id -u)" != 0 ]; then echo "${missing[*]} missing and installing needs root: apt-get install -y ${missing[*]}" >&2; exit 1; fi
    local log; log=$(mktemp)
    if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >"$log" 2>&1; then
      cat "$log" >&2; rm -f "$log"; echo "apt-get install ${missing[*]} failed" >&2; exit 1
    fi
    rm -f "$log"
  fi
  for pkg in containerd runc containernetworking-plugins; do
    echo "$pkg $(dpkg-query -W -f '${Version}' "$pkg" 2>/dev/null || echo '(not from Debian)')"
  done
}

# k3s is not a Go module the proxy serves (its release tags are not module
# versions), so it is built from its source tree, kept beside the checkout as
# a tarball prepared to build (docs/testing.md, "What the harness rests
# on"): the two fork modules whose archives the proxy refuses replaced by
# their upstream releases, the manifests and a placeholder embedded. The tarball is
# extracted into the tool cache and the binary cached by the tarball's
# checksum, so that a changed tarball builds anew and an unchanged one never
# does. The folder beside it is a one-file module proxy for the one .mod file
# the public proxy refuses (github.com/k3s-io/kubernetes@v1.34.2-k3s1): it
# comes first in GOPROXY, the usual proxy after it.
k3s() { # k3s|kube-apiserver|kube-controller-manager|kubelet|kube-scheduler
  local src=${FLEET_ROLE_K3S_SRC:-$top/../shared/k3s}
  local tarball="$src/$k3s_tarball" overlay="$src/goproxy"
  if [ ! -f "$tarball" ] || [ ! -d "$overlay" ]; then
    {
      echo "k3s $k3s_version is built from its source, kept beside the checkout and not in it:"
      echo "  $tarball (the k3s tree at $k3s_commit, prepared to build)"
      echo "  $overlay/ (a Go module proxy overlay for github.com/k3s-io/kubernetes@v1.34.2-k3s1.mod)"
      [ -f "$tarball" ] || echo "the tarball is missing"
      [ -d "$overlay" ] || echo "the overlay folder is missing"
      echo "put them at ../shared/k3s beside the checkout, or set FLEET_ROLE_K3S_SRC to the folder holding both"
    } >&2
    exit 1
  fi
  src=$(cd "$src" && pwd); tarball="$src/$k3s_tarball"; overlay="$src/goproxy"
  local sum; sum=$(sha256sum "$tarball" | cut -c1-16)
  # k3s and the four Kubernetes commands are one binary, built from
  # tools/k3s/main.go in k3s's tree: named by the tarball's checksum and the
  # main's, so that a change to either builds anew. Each name the tests run
  # it by (k3s-VERSION-SUM, as lab/kit/toolcache finds it, and the Kubernetes
  # commands' names) is a link to it.
  local main_sum; main_sum=$(sha256sum "$top/tools/k3s/main.go" | cut -c1-8)
  local bin="$cache/bin/fleet-role-k3s-$k3s_version-$sum-$main_sum"
  exec 9>"$cache/bin/.k3s.lock"  # lab/kit/toolcache takes the same lock
  flock 9
  if [ ! -x "$bin" ]; then
    local tree="$cache/src/k3s-$k3s_version-$sum"
    if [ ! -f "$tree/.extracted" ]; then
      rm -rf "$tree"; mkdir -p "$tree"
      tar -xzf "$tarball" -C "$tree"
      touch "$tree/.extracted"
    fi
    mkdir -p "$tree/fleet-role-k3s"
    cp "$top/tools/k3s/main.go" "$tree/fleet-role-k3s/main.go"
    echo "building k3s $k3s_version and its Kubernetes commands from $tarball (cached in $bin; the first build takes about 10 minutes on 2 fast cores and 17 on slower ones, its module downloads included (docs/testing.md))" >&2
    local goversion proxy tmp
    goversion=$(go env GOVERSION)
    proxy="file://$overlay,$(go env GOPROXY)"
    tmp=$(mktemp -d "$cache/bin/.k3s.XXXXXX")
    # The tags and version stamps of k3s's own build (scripts/build),
    # without the embedded containerd (no ctrd tag) and cri-dockerd: the
    # lab runs Debian's containerd beside it. k3s refuses to start unless
    # UpstreamGolang names the Go that built it.
    if ! (cd "$tree" && GOPROXY="$proxy" CGO_ENABLED=1 \
        CGO_CFLAGS="-DSQLITE_ENABLE_DBSTAT_VTAB=1 -DSQLITE_USE_ALLOCA=1" \
        go build -mod=mod -gcflags="$nodwarf" \
        -tags "netcgo osusergo providerless urfave_cli_no_docs sqlite_omit_load_extension no_cri_dockerd" \
        -ldflags "-w -s -X github.com/k3s-io/k3s/pkg/version.UpstreamGolang=$goversion -X github.com/k3s-io/k3s/pkg/version.Version=$k3s_version -X github.com/k3s-io/k3s/pkg/version.GitCommit=$k3s_commit -X k8s.io/client-go/pkg/version.gitVersion=$k3s_version -X k8s.io/component-base/version.gitVersion=$k3s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=34 -X k8s.io/component-base/version.gitTreeState=clean" \
        -o "$tmp/fleet-role-k3s" ./fleet-role-k3s) >&2; then
      rm -rf "$tmp"; exit 1
    fi
    # A build of an older main or tarball is never asked for again (about
    # 170 MB each).
    find "$cache/bin" -maxdepth 1 -name "fleet-role-k3s-$k3s_version-*" ! -name "${bin##*/}" -delete
    # Before tools/k3s, k3s and the Kubernetes commands were two binaries.
    find "$cache/bin" -maxdepth 1 -type f \( -name "kube-$k3s_version-*" -o -name "k3s-$k3s_version-*" \) -delete
    mv "$tmp/fleet-role-k3s" "$bin"
    rmdir "$tmp"
  fi
  local out="$cache/bin/k3s-$k3s_version-$sum" c
  ln -sfn "$bin" "$out"
  for c in kube-apiserver kube-controller-manager kubelet kube-scheduler; do
    ln -sfn "$bin" "$cache/bin/$c-$k3s_version"
  done
  case "$1" in
    k3s) echo "$out" ;;
    *) echo "$cache/bin/$1-$k3s_version" ;;
  esac
}

case "${1:-}" in
  etcd)
    build etcd "$etcd_version" tools/etcd "-s -w"
    ;;
  kube-apiserver|kube-controller-manager|kubelet|kube-scheduler)
    k3s "$1"
    ;;
  promtool|prometheus)
    # Built from the tool directive of its own nested module, whose pins
    # never touch the project's go.mod; the rules promtool checks are the
    # rules this server evaluates (lab/run/promserver).
    prom "$1"
    ;;
  helm)
    # Built from the tool directive of its own nested module (tools/helm),
    # as promtool is: the chart is rendered and installed by the real helm.
    build helm "$helm_version" tools/helm "-s -w" helm.sh/helm/v4/cmd/helm
    ;;
  fio)
    if ! command -v fio >/dev/null 2>&1; then
      echo "installing fio with apt-get" >&2
      if [ "$(id -u)" != 0 ]; then echo "fio is missing and installing it needs root: apt-get install -y fio" >&2; exit 1; fi
      log=$(mktemp)
      if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio) >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; echo "apt-get install fio failed" >&2; exit 1
      fi
      rm -f "$log"
    fi
    command -v fio
    ;;
  containerd)
    containerd_tools
    ;;
  k3s)
    k3s k3s
    ;;
  qemu)
    # Debian's qemu-user-static: lab/kit/image runs the arm64 and arm/v7
    # builds of the image's binary under it, named on the command line
    # (qemu-aarch64-static BINARY), so no binfmt registration is needed.
    if ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v qemu-arm-static >/dev/null 2>&1; then
      echo "installing qemu-user-static with apt-get" >&2
      if [ "$(id -u)" != 0 ]; then echo "qemu-user-static is missing and installing it needs root: apt-get install -y qemu-user-static" >&2; exit 1; fi
      log=$(mktemp)
      if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static) >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; echo "apt-get install qemu-user-static failed" >&2; exit 1
      fi
      rm -f "$log"
    fi
    echo "qemu-user-static $(dpkg-query -W -f '${Version}' qemu-user-static 2>/dev/null || echo '(not from Debian)')"
    ;;
  chromium)
    # Debian's Chromium, for the status page's test in a real browser
    # (lab/run/browser); its fonts are fonts-dejavu-core's, which the page's
    # screenshot needs and a minimal image may lack.
    missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    [ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
    if [ ${#missing[@]} -gt 0 ]; then
      echo "installing ${missing[*]} with apt-get" >&2
      if [ "$(id -u)" != 0 ]; then echo "${missing[*]} missing and installing needs root: apt-get install -y ${missing[*]}" >&2; exit 1; fi
      log=$(mktemp)
      if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; echo "apt-get install ${missing[*]} failed" >&2; exit 1
      fi
      rm -f "$log"
    fi
    command -v chromium
    ;;
  *)
    echo "usage: hack/tools.sh etcd|kube-apiserver|kube-controller-manager|kubelet|kube-scheduler|containerd|fio|promtool|prometheus|chromium|qemu|helm|k3s" >&2
    exit 2
    ;;
esac
