#!/usr/bin/env bash
# Builds Prometheus Alertmanager with `go build` from its own small module in tools/alertmanager (its dependencies
# must not mix with the main module's) into bin/alertmanager, for the end-to-end tests of notify/alertmanager.
# Idempotent and quick when up to date (a stamp of go.mod, go.sum and the Go version).
#   - alertmanager v0.31.1: the newest release that builds from the module proxy; v0.32.0 and later embed the UI
#     from ui/app/dist, which the module zip lacks (internal/conformance/unbuildable.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
DIR=$ROOT/tools/alertmanager
MOD=github.com/prometheus/alertmanager
mkdir -p "$BIN"

stamp=$(cat "$DIR/go.mod" "$DIR/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
if [ -x "$BIN/alertmanager" ] && [ "$(cat "$BIN/.alertmanager.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
version=$(cd "$DIR" && go list -m -f '{{.Version}}' "$MOD")
echo "alertmanager-tools: building alertmanager $version (first time takes minutes; cached afterwards)" >&2
start=$SECONDS
(cd "$DIR" && go build -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.Revision=$version" \
  -o "$BIN/alertmanager" "$MOD/cmd/alertmanager")
echo "alertmanager-tools: built alertmanager in $((SECONDS - start))s" >&2
echo "$stamp" > "$BIN/.alertmanager.stamp"
