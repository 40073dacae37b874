#!/usr/bin/env bash
# Builds cyclonedx-gomod (github.com/CycloneDX/cyclonedx-gomod, the version tools/cyclonedx-gomod/go.mod pins) with
# `go build` from its own small module into $BIN/cyclonedx-gomod (default bin/), for the release's SBOM (`make release`,
# internal/release). Idempotent and quick when up to date: a stamp of go.mod, go.sum and the Go version decides
# whether to rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${BIN:-$ROOT/bin}
DIR=$ROOT/tools/cyclonedx-gomod
MOD=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
mkdir -p "$BIN"

stamp=$(cat "$DIR/go.mod" "$DIR/go.sum" <(echo "$MOD $(go env GOVERSION)") | sha256sum | cut -c1-16)
if [ ! -x "$BIN/cyclonedx-gomod" ] || [ "$(cat "$BIN/.cyclonedx-gomod.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "sbom-tools: building cyclonedx-gomod" >&2
  start=$SECONDS
  (cd "$DIR" && go build -trimpath -ldflags "-s -w" -o "$BIN/cyclonedx-gomod" "$MOD")
  echo "sbom-tools: built cyclonedx-gomod in $((SECONDS - start))s" >&2
  echo "$stamp" > "$BIN/.cyclonedx-gomod.stamp"
fi
