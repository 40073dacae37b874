#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s), one after the other (`go test -fuzz` takes one
# target at a time). New inputs that fail are written under the package's testdata/fuzz, where they become seeds.
#   FUZZTIME=1m ./hack/fuzz.sh            # longer
#   ./hack/fuzz.sh ./flux                 # one package
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
for pkg in "${pkgs[@]}"; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $FUZZTIME" >&2
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"
  done
done
