#!/usr/bin/env bash
# Builds the helm CLI (helm.sh/helm/v3, the version tools/helm/go.mod pins) with `go build` from its own small module
# into bin/helm, and copies the prometheus-operator's ServiceMonitor and PrometheusRule CRDs from its Go module into
# bin/crds-prometheus-operator/, for the tests in manifests/ (`helm template` of charts/syncmedic, the chart's and
# manifests/components/monitoring's objects applied to the test apiserver). Idempotent and quick when up to date: a
# stamp of go.mod, go.sum, the versions and the Go version decides whether to rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
DIR=$ROOT/tools/helm
MOD=helm.sh/helm/v3/cmd/helm
PROMOP=github.com/prometheus-operator/prometheus-operator@v0.85.0
CRDS=$BIN/crds-prometheus-operator
mkdir -p "$BIN"

stamp=$(cat "$DIR/go.mod" "$DIR/go.sum" <(echo "$MOD version-k8s-ldflags $(go env GOVERSION)") | sha256sum | cut -c1-16)
if [ ! -x "$BIN/helm" ] || [ "$(cat "$BIN/.helm.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "helm-tools: building helm (first time takes minutes; cached afterwards)" >&2
  start=$SECONDS
  # The version stamps helm's own Makefile sets: its version, and the Kubernetes version `helm template` assumes (the
  # minor of the client-go it is built with; without it helm assumes v1.20 and refuses charts needing newer).
  version=$(cd "$DIR" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
  k8s=$(cd "$DIR" && go list -m -f '{{.Version}}' k8s.io/client-go) # v0.34.1: Kubernetes 1.34
  minor=$(echo "$k8s" | cut -d. -f2)
  ldflags="-X helm.sh/helm/v3/internal/version.version=$version"
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
  done
  (cd "$DIR" && go build -trimpath -ldflags "-s -w $ldflags" -o "$BIN/helm" "$MOD")
  echo "helm-tools: built helm in $((SECONDS - start))s" >&2
  echo "$stamp" > "$BIN/.helm.stamp"
fi

# The CRDs as the prometheus-operator ships them (example/prometheus-operator-crd), from its module zip, verified
# against the checksum database by `go mod download`.
if [ "$(cat "$CRDS/.version" 2>/dev/null)" != "$PROMOP" ]; then
  src=$(cd "$DIR" && go mod download -json "$PROMOP" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$CRDS" && mkdir -p "$CRDS"
  for kind in servicemonitors prometheusrules; do
    cp "$src/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$CRDS/"
  done
  chmod u+w "$CRDS"/*.yaml
  echo "$PROMOP" > "$CRDS/.version"
  echo "helm-tools: copied the ServiceMonitor and PrometheusRule CRDs of $PROMOP" >&2
fi
