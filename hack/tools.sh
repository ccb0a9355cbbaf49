#!/usr/bin/env bash
# Builds (once, cached by version) the real components fleet-role's tests run
# against, and prints where they are. Nothing is downloaded but Go modules
# from the module proxy and Debian's packages.
#
#   hack/tools.sh etcd            -> path of the etcd v3.6.15 server binary
#   hack/tools.sh kube-apiserver  -> path of the kube-apiserver v1.37.2 binary
#   hack/tools.sh kube-controller-manager -> path of kube-controller-manager v1.37.2
#   hack/tools.sh kubelet         -> path of the kubelet v1.37.2 binary
#   hack/tools.sh kube-scheduler  -> path of the kube-scheduler v1.37.2 binary
#   hack/tools.sh containerd      -> installs containerd, runc and the CNI plugins
#                                    from Debian when absent; prints what it installed
#   hack/tools.sh fio             -> path of fio, installed with apt-get when absent
#   hack/tools.sh promtool        -> path of Prometheus' promtool v0.316.0 (rules checks and unit tests)
#   hack/tools.sh k3s             -> path of k3s v1.34.2+k3s1, built from the source kept beside
#                                    the checkout (../shared/k3s, or $FLEET_ROLE_K3S_SRC)
#   hack/tools.sh prometheus      -> path of the Prometheus server v0.316.0 (the live alert test)
#   hack/tools.sh chromium        -> path of Debian's Chromium, installed with apt-get when absent
set -euo pipefail
# Go and the tool cache need a home; a CI runner may start without $HOME.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${FLEET_ROLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleet-role}
mkdir -p "$cache/bin"

etcd_version=v3.6.15
kube_version=v1.37.2
promtool_version=v0.316.0 # github.com/prometheus/prometheus, Prometheus 3.16
k3s_version=v1.34.2+k3s1
k3s_commit=8dac81b2
k3s_tarball=k3s-$k3s_version-$k3s_commit-src.tar.gz

build() { # name version dir [ldflags] [package] [go build flags]
  local name=$1 version=$2 dir=$3 ldflags=${4:-} pkg=${5:-.} flags=${6:-}
  local out="$cache/bin/$name-$version"
  # One build at a time per tool: a second caller waits and then finds it built.
  exec 9>"$cache/bin/.$name.lock"  # lab/toolcache takes the same lock
  flock 9
  if [ ! -x "$out" ]; then
    echo "building $name $version (cached in $out; the first build takes minutes)" >&2
    (cd "$top/$dir" && go build -trimpath $flags -ldflags "$ldflags" -o "$out.tmp" "$pkg") >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# The four Kubernetes commands come from one module (tools/kube) and one
# `go build`: they share most of their packages, and one build lets a
# command's link and its last, narrow packages overlap the other commands'
# compiles instead of leaving a core idle between four builds. Asking for one
# builds all four the first time; each is cached under its own name.
kube_commands=(kube-apiserver kube-controller-manager kubelet kube-scheduler)
kube() { # name ldflags
  local name=$1 ldflags=$2 c missing=0
  exec 9>"$cache/bin/.kube.lock"
  flock 9
  for c in "${kube_commands[@]}"; do
    [ -x "$cache/bin/$c-$kube_version" ] || missing=1
  done
  if [ "$missing" = 1 ]; then
    echo "building ${kube_commands[*]} $kube_version (cached in $cache/bin; the first build takes minutes)" >&2
    local tmp; tmp=$(mktemp -d "$cache/bin/.kube.XXXXXX")
    if ! (cd "$top/tools/kube" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" ./cmd/...) >&2; then
      rm -rf "$tmp"; exit 1
    fi
    for c in "${kube_commands[@]}"; do mv "$tmp/$c" "$cache/bin/$c-$kube_version"; done
    rmdir "$tmp"
  fi
  echo "$cache/bin/$name-$kube_version"
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
k3s() {
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
  local out="$cache/bin/k3s-$k3s_version-$sum"
  exec 9>"$cache/bin/.k3s.lock"  # lab/toolcache takes the same lock
  flock 9
  if [ ! -x "$out" ]; then
    local tree="$cache/src/k3s-$k3s_version-$sum"
    if [ ! -f "$tree/.extracted" ]; then
      rm -rf "$tree"; mkdir -p "$tree"
      tar -xzf "$tarball" -C "$tree"
      touch "$tree/.extracted"
    fi
    echo "building k3s $k3s_version from $tarball (cached in $out; the first build takes about 8 minutes on 2 cores)" >&2
    local goversion proxy
    goversion=$(go env GOVERSION)
    proxy="file://$overlay,$(go env GOPROXY)"
    # The tags and version stamps of k3s's own build (scripts/build),
    # without the embedded containerd (no ctrd tag) and cri-dockerd: the
    # lab runs Debian's containerd beside it. k3s refuses to start unless
    # UpstreamGolang names the Go that built it.
    if ! (cd "$tree" && GOPROXY="$proxy" CGO_ENABLED=1 \
        CGO_CFLAGS="-DSQLITE_ENABLE_DBSTAT_VTAB=1 -DSQLITE_USE_ALLOCA=1" \
        go build -mod=mod \
        -tags "netcgo osusergo providerless urfave_cli_no_docs sqlite_omit_load_extension no_cri_dockerd" \
        -ldflags "-w -s -X github.com/k3s-io/k3s/pkg/version.UpstreamGolang=$goversion -X github.com/k3s-io/k3s/pkg/version.Version=$k3s_version -X github.com/k3s-io/k3s/pkg/version.GitCommit=$k3s_commit -X k8s.io/client-go/pkg/version.gitVersion=$k3s_version -X k8s.io/component-base/version.gitVersion=$k3s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=34" \
        -o "$out.tmp" ./cmd/server) >&2; then
      rm -f "$out.tmp"; exit 1
    fi
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

case "${1:-}" in
  etcd)
    build etcd "$etcd_version" tools/etcd "-s -w"
    ;;
  kube-apiserver|kube-controller-manager|kubelet|kube-scheduler)
    # Without the version variables kubectl cannot parse the server's version.
    minor=${kube_version#v1.}; minor=${minor%%.*}
    kube "$1" "-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    ;;
  promtool)
    # Built from the tool directive of its own nested module, whose pins
    # never touch the project's go.mod.
    # remove_all_sd leaves out Prometheus' service discovery plugins (the
    # cloud SDKs: about half of the build), which rules checks never use.
    build promtool "$promtool_version" tools/promtool "-s -w" github.com/prometheus/prometheus/cmd/promtool -tags=remove_all_sd
    ;;
  prometheus)
    # The server the live alert test runs (lab/promserver): the same module,
    # version and tags as promtool, so that the rules promtool checks are
    # the rules this server evaluates, and the two builds share every
    # package of rules, PromQL and the TSDB. Without remove_all_sd it would
    # compile every cloud SDK for service discovery the test never uses
    # (it scrapes static targets); without the builtinassets tag it serves
    # no web UI, which the test does not read (it reads /api/v1).
    build prometheus "$promtool_version" tools/promtool "-s -w" github.com/prometheus/prometheus/cmd/prometheus -tags=remove_all_sd
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
    k3s
    ;;
  chromium)
    # Debian's Chromium, for the status page's test in a real browser
    # (lab/browser); its fonts are fonts-dejavu-core's, which the page's
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
    echo "usage: hack/tools.sh etcd|kube-apiserver|kube-controller-manager|kubelet|kube-scheduler|containerd|fio|promtool|prometheus|chromium|k3s" >&2
    exit 2
    ;;
esac
