#!/usr/bin/env bash
# Builds Flux's controllers with `go build` from their own small modules in tools/ (each needs its own Kubernetes
# libraries, so none can live in the main module) into bin/, and copies each module's CRDs from its
# config/crd/bases. Idempotent and quick when up to date.
#   - notification-controller v1.5.0 → bin/notification-controller, CRDs in bin/crds-flux/
#   - source-controller v1.7.3 → bin/source-controller, CRDs in bin/crds-source-controller/
#   - helm-controller v1.4.3 (Flux 2.7, API v2) → bin/helm-controller-v1.4.3, CRDs in bin/crds-helm-controller-v1.4.3/
#   - helm-controller v0.37.2 (Flux 2.2, v2beta2 storage) → bin/helm-controller-v0.37.2, CRDs in
#     bin/crds-helm-controller-v0.37.2/ (the real-controller tests install each controller's own CRDs, the way a Flux
#     upgrade replaces them)
#   - kustomize-controller v1.7.3 (Flux 2.7) → bin/kustomize-controller-v1.7.3, CRDs in
#     bin/crds-kustomize-controller-v1.7.3/
#   - source-, helm- (v1.4.3) and notification-controller's config/ (their upstream install manifests) →
#     bin/config-NAME-VERSION/, for the tests that run them as Pods
# FLUX_TOOLS_BIN overrides the output directory (default bin/ of this checkout), e.g. to add one controller to a
# shared bin/ whose other controllers are up to date (their stamps match, so they are not rebuilt).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${FLUX_TOOLS_BIN:-$ROOT/bin}
mkdir -p "$BIN"

# build NAME TOOLDIR MODULE CRDDIR: go build MODULE's main package from tools/TOOLDIR into bin/NAME and copy the
# module's config/crd/bases/*.yaml into bin/CRDDIR, unless the stamp matches.
build() {
  local name=$1 dir=$ROOT/tools/$2 mod=$3 crds=$BIN/$4
  local stamp
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$mod $(go env GOVERSION)") | sha256sum | cut -c1-16)
  if [ -x "$BIN/$name" ] && [ -d "$crds" ] && [ "$(cat "$BIN/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  echo "flux-tools: building $name (first time takes minutes; cached afterwards)" >&2
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/$name" "$mod")
  echo "flux-tools: built $name in $((SECONDS - start))s" >&2
  rm -rf "$crds" && mkdir -p "$crds"
  local src
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$mod")
  cp "$src"/config/crd/bases/*.yaml "$crds/"
  chmod u+w "$crds"/*.yaml
  echo "$stamp" > "$BIN/.$name.stamp"
}

# notification-controller keeps its historical stamp (go.mod + go.sum + Go version) so a tree built before the
# other controllers were added is not rebuilt.
DIR=$ROOT/tools/notification-controller
stamp=$(cat "$DIR/go.mod" "$DIR/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
if [ ! -x "$BIN/notification-controller" ] || [ "$(cat "$BIN/.notification-controller.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "flux-tools: building notification-controller (first time takes minutes; cached afterwards)" >&2
  start=$SECONDS
  (cd "$DIR" && go build -trimpath -ldflags "-s -w" -o "$BIN/notification-controller" github.com/fluxcd/notification-controller)
  echo "flux-tools: built notification-controller in $((SECONDS - start))s" >&2
  rm -rf "$BIN/crds-flux" && mkdir -p "$BIN/crds-flux"
  src=$(cd "$DIR" && go list -m -f '{{.Dir}}' github.com/fluxcd/notification-controller)
  cp "$src"/config/crd/bases/*.yaml "$BIN/crds-flux/"
  chmod u+w "$BIN"/crds-flux/*.yaml
  echo "$stamp" > "$BIN/.notification-controller.stamp"
fi

build source-controller source-controller github.com/fluxcd/source-controller crds-source-controller
build helm-controller-v1.4.3 helm-controller github.com/fluxcd/helm-controller crds-helm-controller-v1.4.3
build helm-controller-v0.37.2 helm-controller-v0.37 github.com/fluxcd/helm-controller crds-helm-controller-v0.37.2
build kustomize-controller-v1.7.3 kustomize-controller github.com/fluxcd/kustomize-controller crds-kustomize-controller-v1.7.3

# config NAME TOOLDIR MODULE: copy MODULE's config/ (its upstream install manifests: CRDs, RBAC, the Deployment) into
# bin/config-NAME, for the tests that run the controller as a Pod from them (testenv Node.InstallFlux). Quick: the
# module is already in the module cache.
config() {
  local out=$BIN/config-$1 dir=$ROOT/tools/$2 mod=$3
  local src
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$mod")
  if [ "$(cat "$out/.from" 2>/dev/null)" = "$src" ]; then
    return 0
  fi
  rm -rf "$out" && cp -r "$src/config" "$out" && chmod -R u+w "$out" && echo "$src" > "$out/.from"
}
config source-controller-v1.7.3 source-controller github.com/fluxcd/source-controller
config helm-controller-v1.4.3 helm-controller github.com/fluxcd/helm-controller
config notification-controller-v1.5.0 notification-controller github.com/fluxcd/notification-controller
