#!/usr/bin/env bash
# Builds Argo CD's web UI (the bundle argocd-server serves; the Go modules ship only its sources, their ui/dist/app is a
# placeholder) from a copy of the module's ui/, with the package manager its lockfile names, from the npm registry:
#   bin/argocd-ui-V/   index.html and assets, for `argocd-server --staticassets bin/argocd-ui-V`
#   bin/argocd-V-ui    Argo CD V's multi-call binary with that UI embedded (argocd-server reads index.html only from
#                      its embedded files; the Go module's are a placeholder), built like hack/argocd-tools.sh's
# Cached by a stamp of the lockfile, package.json, the wrapper module's go.sum, the version, Node.js and Go
# (bin/.argocd-ui-V.stamp), so a second run takes a second. Usage: hack/argocd-ui.sh [VERSION...] (default v3.6.1
# v2.14.21). The package managers and webpack run under `nice -n 19`, one webpack worker: minutes of CPU on two cores
# that should not starve a test run beside them.
#   v3.x     pnpm-lock.yaml, "packageManager": "pnpm@12.3.4": `npx pnpm@12.3.4 install --frozen-lockfile`
#   v2.x     yarn.lock (v1): `npx yarn@1.22.22 install --frozen-lockfile`
# Both UIs depend on github.com/argoproj/argo-ui by commit, and GitHub is unreachable from this project's machines (CI
# included). ARGO_UI_GIT=<git directory holding argo-ui> supplies that commit (the install stays frozen to it); by
# default it is the shallow argo-ui repository vendored in internal/testenv/argoui (unpacked into bin/.argo-ui), and
# ARGO_UI_GIT=github leaves the lockfiles' GitHub URLs as they are. When ARGO_UI_GIT lacks a pinned commit, the commit
# ARGO_UI_REV names, or else the one internal/testenv/argoui/stand-ins lists for that pin, is packed instead, with a
# warning (internal/conformance/unbuildable.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
mkdir -p "$BIN"

log() { printf 'argocd-ui: %s\n' "$*" >&2; }

VENDORED=$ROOT/internal/testenv/argoui
# The vendored argo-ui repository, unpacked once per tarball (its digest is the stamp).
if [ -z "${ARGO_UI_GIT:-}" ]; then
  vstamp=$(sha256sum "$VENDORED/argo-ui.git.tar.gz" | cut -c1-16)
  if [ "$(cat "$BIN/.argo-ui/stamp" 2>/dev/null)" != "$vstamp" ]; then
    rm -rf "$BIN/.argo-ui" && mkdir -p "$BIN/.argo-ui"
    tar -C "$BIN/.argo-ui" -xzf "$VENDORED/argo-ui.git.tar.gz"
    echo "$vstamp" >"$BIN/.argo-ui/stamp"
  fi
  ARGO_UI_GIT=$BIN/.argo-ui/argo-ui.git
fi
[ "$ARGO_UI_GIT" != github ] || ARGO_UI_GIT=""

# stand_in PIN: the argo-ui commit packed when ARGO_UI_GIT lacks PIN: ARGO_UI_REV, or the vendored stand-ins' entry.
stand_in() {
  if [ -n "${ARGO_UI_REV:-}" ]; then echo "$ARGO_UI_REV"; return; fi
  awk -v pin="$1" '$1 == pin { print $2 }' "$VENDORED/stand-ins"
}

if ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs and npm (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  flock /tmp/syncmedic-apt.lock $SUDO apt-get update -qq
  flock /tmp/syncmedic-apt.lock $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# module_dir VERSION: the argo-cd module's directory for VERSION, from the wrapper module hack/argocd-tools.sh builds
# it with (downloads the module when the cache lacks it).
module_dir() {
  case $1 in
    v2.14.21) (cd "$ROOT/tools/argocd-v2.14" && go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v2) ;;
    v3.6.1) (cd "$ROOT/tools/argocd-v3.6" && GOTOOLCHAIN=go1.27.2 go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3) ;;
    *) log "unknown version $1 (known: v3.6.1, v2.14.21)"; return 1 ;;
  esac
}

# pm_install DIR: installs DIR's dependencies exactly as its lockfile pins them.
pm_install() {
  local dir=$1 pm
  pm=$(node -p 'require(process.argv[1]).packageManager || ""' "$dir/package.json")
  if [ -f "$dir/pnpm-lock.yaml" ]; then
    [ -n "$pm" ] || pm=pnpm@latest
    (cd "$dir" && nice -n 19 npx --yes "$pm" install --frozen-lockfile --child-concurrency=1 --network-concurrency=8 --reporter=append-only)
  elif [ -f "$dir/yarn.lock" ]; then
    [ -n "$pm" ] || pm=yarn@1.22.22
    (cd "$dir" && nice -n 19 npx --yes "$pm" install --frozen-lockfile --non-interactive --network-concurrency 8)
  else
    log "no pnpm-lock.yaml or yarn.lock in $dir"; return 1
  fi
}

# vendor_git_deps DIR: when ARGO_UI_GIT names a git directory holding argoproj/argo-ui (for machines that reach the npm
# registry but not GitHub), packs the commit DIR's lockfile pins (a GitHub tarball) from it into DIR and points
# package.json and the lockfile at that file, so the install stays frozen to the same commit. With ARGO_UI_GIT=github,
# nothing changes and the package manager downloads the tarball from codeload.github.com.
vendor_git_deps() {
  local dir=$1 lock sha tgz
  [ -n "${ARGO_UI_GIT:-}" ] || return 0
  lock=$dir/pnpm-lock.yaml
  if [ ! -f "$lock" ]; then
    # yarn v1: the same git dependency, cloned from ARGO_UI_GIT (yarn checks out the commit yarn.lock pins).
    sha=$(grep -o 'argo-ui.git#[0-9a-f]\{40\}' "$dir/yarn.lock" | head -1 | sed 's|.*#||')
    [ -n "$sha" ] || return 0
    git --git-dir="$ARGO_UI_GIT" cat-file -e "$sha^{commit}" ||
      { log "ARGO_UI_GIT=$ARGO_UI_GIT lacks argo-ui commit $sha (the lockfile's pin)"; return 1; }
    sed -i "s|git+https://github.com/argoproj/argo-ui.git|git+file://$ARGO_UI_GIT|g" "$dir/package.json" "$dir/yarn.lock"
    log "argo-ui $sha cloned from ARGO_UI_GIT=$ARGO_UI_GIT"
    return 0
  fi
  sha=$(grep -o 'codeload.github.com/argoproj/argo-ui/tar.gz/[0-9a-f]\{40\}' "$lock" | head -1 | sed 's|.*/||')
  [ -n "$sha" ] || return 0
  tgz=argo-ui-$sha.tgz
  local rev=$sha
  if ! git --git-dir="$ARGO_UI_GIT" cat-file -e "$sha^{commit}" 2>/dev/null; then
    rev=$(stand_in "$sha")
    [ -n "$rev" ] ||
      { log "ARGO_UI_GIT=$ARGO_UI_GIT lacks argo-ui commit $sha (the lockfile's pin); ARGO_UI_REV=<commit> packs another one instead"; return 1; }
    log "WARNING: argo-ui $sha (the lockfile's pin) is not in ARGO_UI_GIT=$ARGO_UI_GIT; packing its stand-in $rev instead (internal/conformance/unbuildable.md)"
  fi
  git --git-dir="$ARGO_UI_GIT" archive --format=tar.gz --prefix=package/ -o "$dir/$tgz" "$rev"
  log "argo-ui $rev packed from ARGO_UI_GIT=$ARGO_UI_GIT"
  sed -i "s|git+https://github.com/argoproj/argo-ui.git#$sha|file:$tgz|" "$dir/package.json" "$lock"
  sed -i "s|https://codeload.github.com/argoproj/argo-ui/tar.gz/$sha|file:$tgz|g" "$lock"
}

# argo_ui_rev LOCKFILE: the argo-ui commit the build uses: the lockfile's pin, or its stand-in when ARGO_UI_GIT lacks
# the pin.
argo_ui_rev() {
  local sha
  sha=$(grep -o 'argo-ui/tar.gz/[0-9a-f]\{40\}\|argo-ui.git#[0-9a-f]\{40\}' "$1" | head -1 | sed 's|.*[/#]||')
  if [ -n "${ARGO_UI_GIT:-}" ] && [ -n "$sha" ] && ! git --git-dir="$ARGO_UI_GIT" cat-file -e "$sha^{commit}" 2>/dev/null; then
    sha=$(stand_in "$sha")
  fi
  echo "$sha"
}

# build VERSION: bin/argocd-ui-VERSION unless its stamp matches.
build() {
  local version=$1 src out=$BIN/argocd-ui-$1 work=$BIN/.argocd-ui-src/$1 stamp lock
  src=$(module_dir "$version")/ui
  lock=$src/pnpm-lock.yaml; [ -f "$lock" ] || lock=$src/yarn.lock
  stamp=$(cat "$lock" "$src/package.json" "$ROOT/tools/argocd-${version%.*}/go.sum" <(echo "$version $(node --version) $(argo_ui_rev "$lock") $(go env GOVERSION)") | sha256sum | cut -c1-16)
  if [ -f "$out/index.html" ] && [ -x "$BIN/argocd-$version-ui" ] && [ "$(cat "$BIN/.argocd-ui-$version.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building Argo CD $version's UI (first time takes minutes; cached afterwards)"
  local start=$SECONDS
  rm -rf "$work" && mkdir -p "$work"
  cp -r "$src/." "$work/" && chmod -R u+w "$work"
  vendor_git_deps "$work"
  pm_install "$work"
  log "installed $version's UI dependencies in $((SECONDS - start))s"
  # One webpack worker and a bounded heap: the production build (babel with the React Compiler, terser, source maps)
  # is the slow part.
  (cd "$work" && NODE_ENV=production NODE_OPTIONS=--max-old-space-size=4096 nice -n 19 \
    node node_modules/webpack/bin/webpack.js --config ./src/app/webpack.config.js --mode production --parallelism 1)
  [ -f "$work/dist/app/index.html" ] || { log "$version's UI build left no dist/app/index.html"; return 1; }
  rm -rf "$out" && cp -r "$work/dist/app" "$out"
  rm -rf "$work"
  log "built bin/argocd-ui-$version in $((SECONDS - start))s"
  embed "$version" "$(dirname "$src")" "$out"
  rmdir --ignore-fail-on-non-empty "$BIN/.argocd-ui-src"
  echo "$stamp" >"$BIN/.argocd-ui-$version.stamp"
}

# embed VERSION MODULE UI: bin/argocd-VERSION-ui, the version's multi-call binary built as hack/argocd-tools.sh builds
# bin/argocd-VERSION, from a copy of MODULE whose ui/dist/app is UI (without source maps), as Argo CD's release
# images embed it: argocd-server reads index.html only from its embedded files (--staticassets adds assets, not
# index.html), which the Go module ships as a placeholder. The copy replaces the module (go.mod replace) in a copy
# of the wrapper module; overlays (-overlay) cannot replace files in the module cache.
embed() {
  local version=$1 mod=$2 ui=$3 tooldir toolchain modpath start=$SECONDS
  case $version in
    v2.14.21) tooldir=argocd-v2.14 toolchain=local modpath=github.com/argoproj/argo-cd/v2 ;;
    v3.6.1) tooldir=argocd-v3.6 toolchain=go1.27.2 modpath=github.com/argoproj/argo-cd/v3 ;;
  esac
  local work=$BIN/.argocd-ui-src/$version-embed
  rm -rf "$work" && mkdir -p "$work/wrap"
  cp -r "$mod" "$work/mod" && chmod -R u+w "$work/mod"
  rm -rf "$work/mod/ui/dist/app" && cp -r "$ui" "$work/mod/ui/dist/app" && find "$work/mod/ui/dist/app" -name '*.map' -delete
  cp "$ROOT/tools/$tooldir"/go.mod "$ROOT/tools/$tooldir"/go.sum "$ROOT/tools/$tooldir"/*.go "$work/wrap/"
  echo "replace $modpath => ../mod" >>"$work/wrap/go.mod"
  log "building bin/argocd-$version-ui (argocd-$version with the UI embedded; minutes cold)"
  (cd "$work/wrap" && GOTOOLCHAIN=$toolchain nice -n 19 go build -trimpath -o "$BIN/argocd-$version-ui" \
    -ldflags "-s -w -X $modpath/common.version=${version#v}" "$modpath/cmd")
  rm -rf "$work"
  log "built bin/argocd-$version-ui in $((SECONDS - start))s"
}

[ $# -gt 0 ] || set -- v3.6.1 v2.14.21
for v in "$@"; do build "$v"; done
