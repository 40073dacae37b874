#!/usr/bin/env bash
# phase.sh FILE NAME COMMAND...: runs COMMAND, then prints and appends to FILE how long phase NAME of `make test` took
# (wall-clock seconds, and whether it failed), so that a run's time can be read phase by phase (docs/development.md, "How long").
set -uo pipefail
file=$1 name=$2
shift 2
start=$(date +%s)
"$@"
rc=$?
line="$name $(( $(date +%s) - start )) s$([ $rc -eq 0 ] || echo " (failed: exit $rc)")"
echo "make test: $line" >&2
echo "$line" >>"$file"
exit $rc
