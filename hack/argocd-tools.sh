#!/usr/bin/env bash
# Builds Argo CD's multi-call binary (application-controller, repo-server, argocd-server; argv[0] or
# ARGOCD_BINARY_NAME picks the component) once per tested version, with `go build` from the small wrapper modules in
# tools/argocd-*/ (each version pins its own Kubernetes libraries, so none can live in the main module). Idempotent
# and quick when up to date. For each version V:
#   - bin/argocd-V                 the binary, its version stamped (common.version), else its Version API says v99.99.99
#   - bin/crds-argocd-V/           the version's Application, AppProject and ApplicationSet CRDs (manifests/crds)
#   - bin/argocd-V-hack/           git-verify-wrapper.sh, git-ask-pass.sh, gpg-wrapper.sh from the module's hack/
#                                  (the repo-server runs git through them; module files are read-only, so copied +x)
#   - bin/argocd-install-v3.6.1.yaml  v3.6.1's manifests/install.yaml (the install tests run it as Pods)
# Versions (see UPSTREAM-VERSIONS.md): v2.14.21 (argo-cd/v2), v3.0.12 (a 3.0 release before the hook-finalizer leak
# fixes of 3.0.16) and v3.6.1 (newest; its module says go 1.27, built with GOTOOLCHAIN=go1.27.2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
mkdir -p "$BIN"

log() { printf 'argocd-tools: %s\n' "$*" >&2; }

# The repo-server shells out to git (and the tests create their repositories with it). The Argo CD image the
# install tests run (testenv Node.InstallArgoCD) also takes from this machine the other Debian packages Argo CD's
# Dockerfile installs and its components run: gpg and gpg-agent (the repo-server's keyring), tini (PID 1).
# And curl, file and jq for the image of Argo CD's extension installer (testenv extensionInstallerImage).
missing=()
for pkg in git ca-certificates gpg gpg-agent gpgconf tini curl file libmagic-mgc jq; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  # `make tools` runs two tool scripts at once, and apt-get takes one caller at a time: wait for the other.
  flock /tmp/syncmedic-apt.lock $SUDO apt-get update -qq
  flock /tmp/syncmedic-apt.lock $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# build VERSION TOOLDIR MODULE TOOLCHAIN [CGO]: build MODULE/cmd from tools/TOOLDIR into bin/argocd-VERSION, copy its
# CRDs and git/gpg wrappers, unless the stamp matches. CGO=0 builds it static, as Argo CD's Makefile does for its
# image (CGO_FLAG=0): v3.6.1 runs as Pods, where the CMP sidecar runs the binary inside another image (syncmedic's,
# which has no libc). The other versions keep the go command's default (cgo), as before.
build() {
  local version=$1 dir=$ROOT/tools/$2 mod=$3 toolchain=$4 cgo=${5:-}
  local name=argocd-$version crds=$BIN/crds-argocd-$version hack=$BIN/argocd-$version-hack
  local ldflags="-X $mod/common.version=${version#v}"
  local stamp
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$mod $ldflags $toolchain $(go env GOVERSION)${cgo:+ CGO_ENABLED=$cgo}") | sha256sum | cut -c1-16)
  if [ -x "$BIN/$name" ] && [ -d "$crds" ] && [ -d "$hack" ] && [ "$(cat "$BIN/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building $name (first time takes minutes; cached afterwards)"
  local start=$SECONDS
  (cd "$dir" && GOTOOLCHAIN=$toolchain CGO_ENABLED=${cgo:-$(go env CGO_ENABLED)} go build -trimpath -o "$BIN/$name" -ldflags "-s -w $ldflags" "$mod/cmd")
  log "built $name in $((SECONDS - start))s"
  local src
  src=$(cd "$dir" && GOTOOLCHAIN=$toolchain go list -m -f '{{.Dir}}' "$mod")
  rm -rf "$crds" "$hack" && mkdir -p "$crds" "$hack"
  cp "$src"/manifests/crds/application-crd.yaml "$src"/manifests/crds/appproject-crd.yaml \
    "$src"/manifests/crds/applicationset-crd.yaml "$crds/"
  cp "$src"/hack/git-verify-wrapper.sh "$src"/hack/git-ask-pass.sh "$src"/hack/gpg-wrapper.sh "$hack/"
  chmod u+w "$crds"/*.yaml && chmod 0755 "$hack"/*.sh
  echo "$stamp" > "$BIN/.$name.stamp"
}

build v2.14.21 argocd-v2.14 github.com/argoproj/argo-cd/v2 local
build v3.6.1 argocd-v3.6 github.com/argoproj/argo-cd/v3 go1.27.2 0
build v3.0.12 argocd-v3.0 github.com/argoproj/argo-cd/v3 local

# The install manifests of the version the install tests run as Pods (testenv Node.InstallArgoCD):
# bin/argocd-install-v3.6.1.yaml, the module's manifests/install.yaml. Quick: the module is in the module cache.
src=$(cd "$ROOT/tools/argocd-v3.6" && GOTOOLCHAIN=go1.27.2 go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
if ! cmp -s "$src/manifests/install.yaml" "$BIN/argocd-install-v3.6.1.yaml"; then
  cp "$src/manifests/install.yaml" "$BIN/argocd-install-v3.6.1.yaml" && chmod u+w "$BIN/argocd-install-v3.6.1.yaml"
fi
