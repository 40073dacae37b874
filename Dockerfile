# syntax=docker/dockerfile:1
# The image the manifests and the Helm chart use (ghcr.io/syncmedic/syncmedic), for users with docker: `make image`
# builds the same file tree without a container engine (internal/imagebuild). On scratch: the statically linked
# syncmedic binary at /usr/local/bin/syncmedic, Debian's CA certificates (/etc/ssl/certs/ca-certificates.crt, from
# the ca-certificates package of the Debian build image) and /etc/passwd and /etc/group with the non-root user 65532
# (internal/imagebuild/rootfs), nothing else (no shell, no package manager), run as 65532. One binary serves the
# daemon (`syncmedic serve`) and the Argo CD CMP sidecar (`syncmedic cmp generate`, started by Argo CD's
# argocd-cmp-server, which the sidecar mounts from the repo-server).
#
#   docker buildx build --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t registry.example.com/syncmedic:v0.1.0 .
#
# The build base is pinned by tag and digest (the digest decides which image it is; the tag says what it is); the
# binary is built with -trimpath, an empty build ID and no VCS stamp, so the same source and VERSION give the same
# binary. To move the base, resolve the new digest with `docker buildx imagetools inspect <image>:<tag>` and change
# the line; internal/imagebuild/dockerfile_test.go checks the pinning and that this file copies exactly the files
# `make image` puts in its image. The Go version matches go.mod's toolchain.
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

FROM scratch
ARG VERSION=v0.1.0-dev
ARG REVISION=
LABEL org.opencontainers.image.source=https://github.com/syncmedic/syncmedic \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION}
COPY --from=build /out/syncmedic /usr/local/bin/syncmedic
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY internal/imagebuild/rootfs/etc/passwd internal/imagebuild/rootfs/etc/group /etc/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/syncmedic"]
