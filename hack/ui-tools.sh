#!/usr/bin/env bash
# Installs what the browser tests need and builds the Argo CD UI extension. Idempotent and quick when up to date.
#   - chromium and chromium-driver (Debian packages) when /usr/bin/chromium is missing: the headless browser of
#     cmd/syncmedic's *InChromium tests
#   - nodejs and npm (Debian packages) when npm is missing
#   - `npm ci` in ui/extension (esbuild and, for the tests' host page only, React's UMD builds, pinned by
#     package-lock.json) and `npm run build` into ui/extension/dist/extension-syncmedic.js (committed: go:embed serves
#     it), when package.json, package-lock.json, src/ or the Node.js version changed (stamp: bin/.ui-extension.stamp),
#     and the digest the extension component pins (manifests/components/argocd-extension/extension.tar.sha256)
# `hack/ui-tools.sh screenshots` then regenerates docs/screenshots/*.png from the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
EXT=$ROOT/ui/extension

log() { printf 'tools-ui: %s\n' "$*" >&2; }

# apt-install PACKAGE...: Debian packages, with sudo when not root.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  # `make tools` runs two tool scripts at once, and apt-get takes one caller at a time: wait for the other.
  flock /tmp/syncmedic-apt.lock $sudo apt-get update -qq
  flock /tmp/syncmedic-apt.lock $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium and chromium-driver (Debian packages)"
  apt_install chromium chromium-driver
fi

if ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs and npm (Debian packages)"
  apt_install nodejs npm
fi
mkdir -p "$BIN"
stamp=$(cd "$EXT" && cat package.json package-lock.json $(find src -type f | LC_ALL=C sort) <(node --version) | sha256sum | cut -c1-16)
if [ ! -d "$EXT/node_modules" ] || [ ! -f "$EXT/dist/extension-syncmedic.js" ] || [ "$(cat "$BIN/.ui-extension.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "npm ci and npm run build in ui/extension"
  (cd "$EXT" && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)
  # The extension component and the chart pin the archive's sha256 (manifests/components/argocd-extension/extension.tar.sha256,
  # charts/syncmedic/files/extension.tar.sha256).
  go test ./manifests -run '^TestTheExtensionComponentPinsTheArchiveServeServes$' -count=1 -update-digest >/dev/null
  echo "$stamp" >"$BIN/.ui-extension.stamp"
fi

if [ "${1:-}" = "screenshots" ]; then
  log "regenerating docs/screenshots (browser tests against the test control plane)"
  # The extension's screenshot is taken inside Argo CD's own UI (make tools-argocd-ui, part of make tools).
  KUBEBUILDER_ASSETS=$BIN SYNCMEDIC_BIN=$BIN go test ./cmd/syncmedic -run 'InChromium' -count=1 -update
fi
