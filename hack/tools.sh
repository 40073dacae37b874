#!/usr/bin/env bash
# Installs and builds what the end-to-end tests need, into bin/ (git-ignored). Idempotent and quick when up to date.
#   - redis-server (Debian package) for the in-process argocd-server's cache
#   - containerd, runc, containernetworking-plugins, iptables, conntrack, busybox-static (Debian packages) and
#     kubelet + kube-scheduler + kube-proxy v1.31.0 and CoreDNS v1.14.7 for the real node of internal/testenv, and
#     kubectl v1.31.0 for the install tests (internal/install)
#     (node.go); ca-certificates (Debian package) for the syncmedic image `make image` builds (internal/imagebuild)
#   - kube-apiserver and kube-controller-manager v1.31.0 and etcd v3.5, built with `go build` from the pinned
#     modules in tools/ (the controller-manager runs the Job, TTL, garbage-collector and namespace controllers for
#     the real-controller tests)
#   - controller-gen v0.16.5, and the CRDs the tests install, generated or copied from the Go modules:
#     Argo CD (argo-cd/v2 manifests/crds), Flux HelmRelease (controller-gen over helm-controller/api, all versions),
#     Argo Workflows Workflow (argo-workflows/v3 manifests, the minimal CRD its install manifests use)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
mkdir -p "$BIN"

log() { printf 'tools: %s\n' "$*" >&2; }

# The Debian packages the tests need: redis-server, and the real node's container runtime (containerd, runc, the
# CNI bridge and host-local plugins, iptables and conntrack for the kubelet, busybox-static for the busybox image),
# and ca-certificates for the syncmedic image (internal/imagebuild).
# Each is installed only when missing.
DEBS=()
command -v redis-server >/dev/null 2>&1 || DEBS+=(redis-server)
command -v containerd >/dev/null 2>&1 || DEBS+=(containerd)
command -v runc >/dev/null 2>&1 || DEBS+=(runc)
[ -x /usr/lib/cni/bridge ] || DEBS+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || DEBS+=(iptables)
command -v conntrack >/dev/null 2>&1 || DEBS+=(conntrack)
dpkg -s busybox-static >/dev/null 2>&1 || DEBS+=(busybox-static)
[ -f /etc/ssl/certs/ca-certificates.crt ] || DEBS+=(ca-certificates)
if [ ${#DEBS[@]} -gt 0 ]; then
  log "installing ${DEBS[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  # `make tools` runs two tool scripts at once, and apt-get takes one caller at a time: wait for the other.
  flock /tmp/syncmedic-apt.lock $SUDO apt-get update -qq
  flock /tmp/syncmedic-apt.lock $SUDO apt-get install -y -qq --no-install-recommends "${DEBS[@]}" >/dev/null
fi

# build NAME TOOLDIR PACKAGE [LDFLAGS]: go build PACKAGE from tools/TOOLDIR into bin/NAME unless the stamp matches.
# Every tool script links with -s -w (no symbol table, no DWARF; panics still print function names): the tests never
# debug these binaries, and a link without them takes about half the time (kube-apiserver: 7 s instead of 18 s on 2
# cores). The flags are left out of the stamps, so binaries built before keep working and are not rebuilt for this.
# A PACKAGE of the tool's own directory (".") stamps its Go files too.
build() {
  local name=$1 dir=$ROOT/tools/$2 pkg=$3 ldflags=${4:-}
  local stamp own=()
  [ "$pkg" != . ] || own=("$dir"/*.go)
  stamp=$(cat "$dir/go.mod" "$dir/go.sum" "${own[@]}" <(echo "$pkg $ldflags $(go env GOVERSION)") | sha256sum | cut -c1-16)
  if [ -x "$BIN/$name" ] && [ "$(cat "$BIN/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  log "building $name from $pkg (first time takes minutes; cached afterwards)"
  (cd "$dir" && go build -trimpath -o "$BIN/$name" -ldflags "-s -w $ldflags" "$pkg")
  echo "$stamp" > "$BIN/.$name.stamp"
}

K8S_LDFLAGS="-X k8s.io/component-base/version.gitVersion=v1.31.0 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=31"
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$K8S_LDFLAGS"
build kube-controller-manager kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager "$K8S_LDFLAGS"
# The real node's kubelet and scheduler (internal/testenv/node.go), from their own module so that adding them leaves
# the stamps of the two above alone.
build kubelet kubelet k8s.io/kubernetes/cmd/kubelet "$K8S_LDFLAGS"
build kube-scheduler kubelet k8s.io/kubernetes/cmd/kube-scheduler "$K8S_LDFLAGS"
# The node's kube-proxy (iptables mode, in its network namespace), from a module of its own for the same reason.
build kube-proxy kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$K8S_LDFLAGS"
# kubectl, for the install tests that run the install pages' commands (docs/install-*.md) as written against the real node (internal/install).
build kubectl kubectl k8s.io/kubernetes/cmd/kubectl "$K8S_LDFLAGS"
# The node's cluster DNS: CoreDNS with only the plugins its Corefile uses (tools/coredns/main.go).
build coredns coredns .
build etcd etcd go.etcd.io/etcd/server/v3
build controller-gen controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

# moddir DIR MODULE: the module's source directory in the module cache, downloading it first if needed
# (`go list -m` prints an empty Dir for a module that is not in the cache yet).
moddir() {
  local d
  d=$(cd "$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
  [ -n "$d" ] && [ -d "$d" ] || { log "cannot find the source of $2 (from $1/go.mod)"; return 1; }
  echo "$d"
}

CRDS=$BIN/crds
CRDSTAMP=$( (cat go.mod go.sum tools/argo-workflows/go.mod; echo v3) | sha256sum | cut -c1-16)
if [ "$(cat "$CRDS/.stamp" 2>/dev/null)" != "$CRDSTAMP" ]; then
  log "generating CRDs into bin/crds"
  rm -rf "$CRDS" && mkdir -p "$CRDS"
  argocd=$(moddir "$ROOT" github.com/argoproj/argo-cd/v2)
  for f in application-crd.yaml appproject-crd.yaml applicationset-crd.yaml; do
    cp "$argocd/manifests/crds/$f" "$CRDS/argocd-$f"
  done
  # The HelmRelease CRD the way Flux builds it: controller-gen over the API module, every version (v2, v2beta2, v2beta1).
  helmapi=$(moddir "$ROOT" github.com/fluxcd/helm-controller/api)
  tmp=$(mktemp -d)
  trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
  cp -r "$helmapi" "$tmp/api" && chmod -R u+w "$tmp/api"
  (cd "$tmp/api" && GOFLAGS=-mod=mod "$BIN/controller-gen" crd paths=./... output:crd:artifacts:config="$tmp/out" >/dev/null)
  cp "$tmp/out/helm.toolkit.fluxcd.io_helmreleases.yaml" "$CRDS/"
  wf=$(moddir "$ROOT/tools/argo-workflows" github.com/argoproj/argo-workflows/v3)
  # The minimal CRD is the one Argo Workflows' install manifests ship (the "full" one is not valid for a v1.31
  # apiserver: empty types in the inline/steps schemas).
  cp "$wf/manifests/base/crds/minimal/argoproj.io_workflows.yaml" "$CRDS/"
  chmod u+w "$CRDS"/*.yaml
  echo "$CRDSTAMP" > "$CRDS/.stamp"
fi
