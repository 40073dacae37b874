#!/usr/bin/env bash
# Builds Argo Workflows' workflow-controller once per tested version with `go build` from small wrapper modules in
# tools/workflow-controller*/ (each pins its own Kubernetes libraries, so none can live in the main module) into bin/,
# and copies each module's CRDs (manifests/base/crds/minimal, the ones its install manifests ship). Idempotent and
# quick when up to date.
#   - workflow-controller v3.6.2 → bin/workflow-controller-v3.6.2, CRDs in bin/crds-argo-workflows-v3.6.2/
#   - workflow-controller v3.5.10 (the last release keeping the artifact-gc finalizer of a failed Workflow without
#     artifacts, argo-workflows #13499) → bin/workflow-controller-v3.5.10, CRDs in bin/crds-argo-workflows-v3.5.10/
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
mkdir -p "$BIN"

log() { printf 'workflows-tools: %s\n' "$*" >&2; }

# build VERSION TOOLDIR MODULE: go build MODULE's cmd/workflow-controller from tools/TOOLDIR into
# bin/workflow-controller-VERSION (its version stamped, as Argo Workflows' Makefile does) and copy the module's minimal
# CRDs into bin/crds-argo-workflows-VERSION, unless the stamp matches.
build() {
  local version=$1 dir=$ROOT/tools/$2 mod=$3
  local name=workflow-controller-$version crds=$BIN/crds-argo-workflows-$version
  local ldflags="-X $mod.version=$version"
  local stamp
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$mod $ldflags $(go env GOVERSION)") | sha256sum | cut -c1-16)
  if [ -x "$BIN/$name" ] && [ -d "$crds" ] && [ "$(cat "$BIN/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building $name (first time takes minutes; cached afterwards)"
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -o "$BIN/$name" -ldflags "-s -w $ldflags" "$mod/cmd/workflow-controller")
  log "built $name in $((SECONDS - start))s"
  local src
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$mod")
  rm -rf "$crds" && mkdir -p "$crds"
  cp "$src"/manifests/base/crds/minimal/argoproj.io_*.yaml "$crds/"
  chmod u+w "$crds"/*.yaml
  echo "$stamp" > "$BIN/.$name.stamp"
}

build v3.6.2 workflow-controller github.com/argoproj/argo-workflows/v3
build v3.5.10 workflow-controller-v3.5 github.com/argoproj/argo-workflows/v3
