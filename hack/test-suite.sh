#!/usr/bin/env bash
# test-suite.sh: the suite of `make test` once the tools are built (PHASES, BIN and COMPAT_DIR come from the
# Makefile; FUZZTIME defaults to 5s). Three phases, each timed into PHASES by hack/phase.sh:
#   go-test       every package of ./..., in hack/test-packages.sh's order, against the real control plane and node;
#   compat-check  the run's compatibility matrix must be the committed docs/compat.md;
#   fuzz          every fuzz target for FUZZTIME (hack/fuzz.sh).
# The fuzz phase runs beside go-test, at the lowest CPU priority (nice 19) in its own process group: for most of
# go-test the two cores are partly idle (the real-controller scenarios wait for controllers and thresholds, the node's
# packages for the node), and fuzzing fills that instead of running after it, while the tests keep their CPU share.
# Its output is kept in BIN/fuzz.log and printed when it ends; the suite fails when any phase fails, and a failing
# go-test stops the fuzzing at once.
# go test's compiler, linker and vet run with GOGC=BUILD_GOGC (default 800, as the tool builds: Makefile); the test
# binaries run with the caller's GOGC, or none (`go test -exec` sets it back), so the controllers they start keep their
# usual memory.
# Test binaries are linked with -s -w (no symbol table, no DWARF; panics and failures still print function names and
# lines): go test links every test binary again on every run, and -s -w nearly halves each link
# (internal/conformance/argo: 8 s instead of 13 s on 2 cores).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${PHASES:?}" "${BIN:?}" "${COMPAT_DIR:?}"
FUZZTIME=${FUZZTIME:-5s}
BUILD_GOGC=${BUILD_GOGC:-800}
if [ -n "${GOGC+set}" ]; then testexec="env GOGC=$GOGC"; else testexec="env -u GOGC"; fi
fuzzlog=$BIN/fuzz.log

setsid nice -n 19 ./hack/phase.sh "$PHASES" fuzz env FUZZTIME="$FUZZTIME" ./hack/fuzz.sh >"$fuzzlog" 2>&1 &
fuzz=$!
stop_fuzz() { kill -- "-$fuzz" 2>/dev/null || kill "$fuzz" 2>/dev/null; }
trap stop_fuzz EXIT

pkgs=$(./hack/test-packages.sh) || { echo "test-suite: hack/test-packages.sh failed" >&2; exit 1; }
[ -n "$pkgs" ] || { echo "test-suite: hack/test-packages.sh listed no package" >&2; exit 1; }
# shellcheck disable=SC2086 # one word per package
./hack/phase.sh "$PHASES" go-test env KUBEBUILDER_ASSETS="$BIN" SYNCMEDIC_BIN="$BIN" SYNCMEDIC_COMPAT_DIR="$COMPAT_DIR" \
	GOGC="$BUILD_GOGC" go test -exec "$testexec" -count=1 -timeout 60m -ldflags='-s -w' $pkgs || { echo "test-suite: go test failed; fuzzing stopped" >&2; exit 2; }
./hack/phase.sh "$PHASES" compat-check make --no-print-directory compat-check || exit 2

if kill -0 "$fuzz" 2>/dev/null; then
	echo "test-suite: waiting for the fuzz phase, which runs beside go test (its output: $fuzzlog)" >&2
fi
wait "$fuzz"
rc=$?
trap - EXIT
echo "test-suite: the fuzz phase's output:" >&2
cat "$fuzzlog" >&2
[ "$rc" = 0 ] || { echo "test-suite: the fuzz phase failed (exit $rc)" >&2; exit 2; }
