# The image the manifests use (ghcr.io/syncmedic/syncmedic): the syncmedic binary at /usr/local/bin/syncmedic, run
# as a non-root user. One binary serves both the daemon (`syncmedic serve`) and the Argo CD CMP sidecar
# (`syncmedic cmp generate`, started by Argo CD's argocd-cmp-server entrypoint, which the sidecar mounts from the
# repo-server). Build: docker build -t ghcr.io/syncmedic/syncmedic:v0.1.0 --build-arg VERSION=v0.1.0 .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/syncmedic/syncmedic.Version=${VERSION}" \
    -o /out/syncmedic ./cmd/syncmedic

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/syncmedic /usr/local/bin/syncmedic
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/syncmedic"]
