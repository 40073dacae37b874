#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s), one after the other (`go test -fuzz` takes one
# target at a time). New inputs that fail are written under the package's testdata/fuzz, where they become seeds.
#   FUZZTIME=1m ./hack/fuzz.sh            # longer
#   ./hack/fuzz.sh ./flux                 # one package
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
pkgs=("$@")
# Test binaries are linked without the symbol table and DWARF, as `make test` links them (hack/test-suite.sh).
LDFLAGS='-s -w'
[ ${#pkgs[@]} -gt 0 ] || mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
for pkg in "${pkgs[@]}"; do
  # A package whose tests do not build fails here, rather than being skipped as one without fuzz targets.
  list=$(go test -ldflags "$LDFLAGS" -list '^Fuzz' "$pkg") || { echo "fuzz: go test -list '^Fuzz' $pkg failed" >&2; exit 1; }
  for target in $(printf '%s\n' "$list" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target for $FUZZTIME" >&2
    # Go's fuzzing coordinator sometimes reports the end of -fuzztime as a failure: "context deadline exceeded",
    # with no failing input (a worker busy when the time ran out, more often on a loaded machine: `make test` fuzzes
    # at nice 19 beside go test). That run found nothing; it is run again, up to three times in all. A real failure
    # names its input ("Failing input written to ...") and fails.
    for attempt in 1 2 3; do
      out=$(mktemp)
      if go test -ldflags "$LDFLAGS" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
        rm -f "$out"
        break
      fi
      if [ "$attempt" -lt 3 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
        echo "fuzz: $pkg $target: the fuzzing engine's own deadline error, no failing input: running it again" >&2
        rm -f "$out"
        continue
      fi
      rm -f "$out"
      exit 1
    done
  done
done
