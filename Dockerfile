# syntax=docker/dockerfile:1
# fleet-role's one image: the controller (Deployment) and the probe
# (DaemonSet) are the same static binary, started by command name. It holds
# no fio and no shell: the fsync reading is native Go. It builds ./cmd/fleet-role
# only: the demo (cmd/fleet-role-demo) and the bench are not in the image.
#
#   docker build -t ghcr.io/fleet-role/fleet-role:dev .
#
# The build stage runs on the builder's own platform and cross-compiles, so a
# multi-platform build (docker buildx build --platform
# linux/amd64,linux/arm64,linux/arm/v7) needs no emulation. A release is
# built without Docker: hack/release.sh (lab/kit/image, held to this file).
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG TARGETVARIANT
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd ./cmd
COPY internal ./internal
# CGO off: a static binary that runs on a base with no C library.
# -buildvcs=true: built in a Git checkout, the binary names its commit
# (`fleet-role version`); this context leaves .git out, so here it names
# none and says "(devel)", without failing.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH GOARM=${TARGETVARIANT#v} \
    go build -trimpath -buildvcs=true -ldflags="-s -w" -o /out/fleet-role ./cmd/fleet-role

# distroless/static: CA certificates, /etc/passwd with the nonroot user
# (65532), and nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fleet-role /usr/local/bin/fleet-role
USER 65532:65532
ENTRYPOINT ["fleet-role"]
