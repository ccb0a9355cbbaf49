#!/usr/bin/env bash
# Writes a release of fleet-role from this checkout into a directory
# (default dist/VERSION), reproducibly: built twice from one commit, every
# file is the same to the byte (hack/release_test.go holds it).
#
#   hack/release.sh [--allow-dirty] [OUT_DIR]
#
# The version is the newest CHANGELOG.md names (its first "## vX.Y.Z"
# heading); deploy/base/kustomization.yaml must name the same image tag, so
# that the manifest released runs the image released. It writes:
#   fleet-role-VERSION-linux-amd64, -linux-arm64, -linux-armv7
#                                the binary for each platform (static,
#                                `fleet-role version` says VERSION)
#   fleet-role-VERSION-image.tar one OCI image index of the three platforms,
#                                named ghcr.io/fleet-role/fleet-role:VERSION
#                                (`skopeo copy oci-archive:FILE docker://...`
#                                publishes it; `ctr images import` loads it)
#   fleet-role.yaml              the manifest (deploy/fleet-role.yaml)
#   SHA256SUMS                   the checksums of the four above
# A tree with uncommitted changes is refused (the binaries would name a
# commit that is not what they hold) unless --allow-dirty.
set -euo pipefail
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$(dirname "$0")/.."

allow_dirty=0
if [ "${1:-}" = "--allow-dirty" ]; then allow_dirty=1; shift; fi
if [ $# -gt 1 ]; then echo "usage: hack/release.sh [--allow-dirty] [OUT_DIR]" >&2; exit 2; fi

version=$(sed -n 's/^## \(v[0-9][^ ]*\).*/\1/p' CHANGELOG.md | head -n 1)
if [ -z "$version" ]; then
  echo "CHANGELOG.md names no version: its newest entry must start '## vX.Y.Z'" >&2; exit 1
fi
tag=$(sed -n 's/^ *newTag: *//p' deploy/base/kustomization.yaml)
if [ "$tag" != "$version" ]; then
  echo "deploy/base/kustomization.yaml names image tag '$tag', CHANGELOG.md's newest version is $version: make them one, then run deploy/render.sh" >&2
  exit 1
fi
if ! grep -q "image: ghcr.io/fleet-role/fleet-role:$version\$" deploy/fleet-role.yaml; then
  echo "deploy/fleet-role.yaml does not name ghcr.io/fleet-role/fleet-role:$version: run deploy/render.sh" >&2; exit 1
fi
if [ "$allow_dirty" = 0 ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then
  echo "the tree has uncommitted changes (git status): commit them, or pass --allow-dirty for a build that is no release" >&2; exit 1
fi
out=${1:-dist/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The same flags as the image's build (lab/kit/image.FleetRole), and the version
# stamped as lab/kit/image.Versioned stamps it.
ldflags="-s -w -X github.com/fleet-role/fleet-role/internal/version.version=$version"
files=()
for p in linux/amd64 linux/arm64 linux/arm/v7; do
  IFS=/ read -r os arch variant <<<"$p"
  name="fleet-role-$version-$os-$arch${variant}"
  echo "building $name" >&2
  env -u GOARM CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" ${variant:+GOARM=${variant#v}} \
    go build -trimpath -buildvcs=true -ldflags="$ldflags" -o "$out/$name" ./cmd/fleet-role
  files+=("$name")
done
echo "building the image index" >&2
go run ./lab/cmd/fleet-role-image -platforms all -version "$version" \
  -tag "ghcr.io/fleet-role/fleet-role:$version" -o "$out/fleet-role-$version-image.tar" >/dev/null
files+=("fleet-role-$version-image.tar")
cp deploy/fleet-role.yaml "$out/fleet-role.yaml"
files+=(fleet-role.yaml)
(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
echo "fleet-role $version written to $out:" >&2
cat "$out/SHA256SUMS"
