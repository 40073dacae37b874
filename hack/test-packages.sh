#!/usr/bin/env bash
# test-packages.sh prints the packages of ./... in the order `make test` hands them to `go test` (docs/development.md, "How long").
#
# `go test` starts the packages' test binaries strictly in the order it is given them, two at a time (-p is
# GOMAXPROCS), and a package whose tests wait for the machine's one real node (internal/testenv RealNode,
# RealNodeWhileUsed: the node lock) holds its slot while it waits. In ./...'s alphabetical order the node packages
# follow each other (internal/conformance/argo, internal/conformance/flux, internal/imagebuild, internal/testenv), so
# for minutes one slot waited for the node the other held, with nothing compiling or running in it. Here:
#   1. internal/conformance/argo, the longest node user (its scenarios mostly wait for controllers), first, so that
#      the node is busy from the earliest moment;
#   2. every package that never uses the node, the slowest ones first (SLOW below; the rest alphabetically), in the
#      other slot while (1) holds the node;
#   3. the other node packages, whose tests also do work beside the node and overlap the end of (1), in NODE below's
#      order (any other alphabetically after them): internal/conformance/flux, which starts while (1) still runs and
#      whose node scenarios come last in it (parallel tests run after the package's serial ones); kube, whose one node
#      test is parallel too, so its other tests run while the Flux package holds the node; internal/testenv, mostly
#      on the node; internal/imagebuild, a single test on the node; internal/install, the install tests, all on it.
# A package counts as a node package when one of its test files calls testenv.RealNode or RealNodeWhileUsed.
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
first=("$module/internal/conformance/argo")
# Packages without the node that take minutes (the last cold run's order of size), started before the quick ones.
SLOW=(cmd/syncmedic internal/reliability internal/conformance/workflows argocd/remedy argocd manifests flux argocd/cmp)

# The node packages in the order they should queue for the node (3 above).
NODE=(internal/conformance/flux kube internal/testenv internal/imagebuild internal/install)

declare -A seen=()
node=() rest=()
while read -r pkg dir files; do
	uses=false
	for f in $files; do
		if grep -qE '\bRealNode(WhileUsed)?\(' "$dir/$f"; then
			uses=true
			break
		fi
	done
	if $uses; then node+=("$pkg"); else rest+=("$pkg"); fi
done < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)

emit() {
	if [[ -z ${seen[$1]:-} ]]; then
		seen[$1]=1
		echo "$1"
	fi
}
# emit_listed ORDER PKGS: emits the packages of array PKGS named (module-relative) in array ORDER, in ORDER's order.
emit_listed() {
	local -n order=$1 pkgs=$2
	local s p
	for s in "${order[@]}"; do
		for p in "${pkgs[@]}"; do [[ $p == "$module/$s" ]] && emit "$p"; done
	done
	return 0
}
for p in "${first[@]}"; do emit "$p"; done
emit_listed SLOW rest
for p in "${rest[@]}"; do emit "$p"; done
emit_listed NODE node
for p in "${node[@]}"; do emit "$p"; done
