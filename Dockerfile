# syntax=docker/dockerfile:1
# The image the manifests and the Helm chart use (ghcr.io/syncmedic/syncmedic): the statically linked syncmedic binary
# at /usr/local/bin/syncmedic and nothing else, on distroless/static (no shell, no package manager), run as the
# non-root user 65532. One binary serves the daemon (`syncmedic serve`) and the Argo CD CMP sidecar (`syncmedic cmp
# generate`, started by Argo CD's argocd-cmp-server, which the sidecar mounts from the repo-server).
#
# Build it with `make image IMAGE=registry.example.com/syncmedic:v0.1.0` (docker buildx, or ko when there is no
# docker; see the README's "Install in a cluster"), or directly:
#   docker buildx build --build-arg VERSION=v0.1.0 -t registry.example.com/syncmedic:v0.1.0 .
#
# Reproducible: both bases are pinned by tag and digest (the digest decides which image it is; the tag says what it
# is); the binary is built with -trimpath, an empty build ID and no VCS stamp, so the same source and VERSION give the
# same bytes. To move a base, resolve the new digest with `docker buildx imagetools inspect <image>:<tag>` and change
# the line (manifests/image_test.go checks the pinning). The Go version matches go.mod's toolchain.
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X github.com/syncmedic/syncmedic.Version=${VERSION}" \
    -o /out/syncmedic ./cmd/syncmedic

FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
COPY --from=build /out/syncmedic /usr/local/bin/syncmedic
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/syncmedic"]
