#!/usr/bin/env bash
# Builds Flux's notification-controller v1.5.0 with `go build` from tools/notification-controller (its own go.mod:
# it needs Kubernetes v0.32 libraries, so it cannot live in the main module) into bin/, and copies its CRDs from
# the module's config/crd/bases into bin/crds-flux/. Idempotent and quick when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
DIR=$ROOT/tools/notification-controller
mkdir -p "$BIN"
stamp=$(cat "$DIR/go.mod" "$DIR/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
if [ ! -x "$BIN/notification-controller" ] || [ "$(cat "$BIN/.notification-controller.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "flux-tools: building notification-controller (first time takes minutes; cached afterwards)" >&2
  (cd "$DIR" && go build -trimpath -o "$BIN/notification-controller" github.com/fluxcd/notification-controller)
  rm -rf "$BIN/crds-flux" && mkdir -p "$BIN/crds-flux"
  src=$(cd "$DIR" && go list -m -f '{{.Dir}}' github.com/fluxcd/notification-controller)
  cp "$src"/config/crd/bases/*.yaml "$BIN/crds-flux/"
  chmod u+w "$BIN"/crds-flux/*.yaml
  echo "$stamp" > "$BIN/.notification-controller.stamp"
fi
