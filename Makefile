# syncmedic — build and test entry points. `make test` is the one command that runs the whole suite; it first
# installs what a fresh machine lacks (Debian redis-server, and the control-plane binaries built with `go build`).
SHELL := /bin/bash
BIN := $(CURDIR)/bin

.PHONY: all build docs test test-unit tools tools-kube tools-flux tools-argocd tools-argocd-ui test-argocd-ui tools-workflows tools-alertmanager tools-helm tools-sbom tools-ui compat compat-check fuzz chart release

# How long `make test` fuzzes each fuzz target (hack/fuzz.sh); `make fuzz FUZZTIME=5m` for a real session.
FUZZTIME ?= 5s

all: build

build:
	go build -o $(BIN)/syncmedic ./cmd/syncmedic

# Everything the end-to-end tests need: kube-apiserver, kube-controller-manager, etcd, controller-gen, generated CRDs,
# redis-server, git, and the real node's kubelet, kube-scheduler, kube-proxy, CoreDNS, containerd, runc, CNI plugins, busybox (hack/tools.sh); Flux's notification-, source-, helm- and kustomize-controllers (hack/flux-tools.sh); Argo CD's
# multi-call binary per tested version (hack/argocd-tools.sh); Argo Workflows' workflow-controller per tested version
# (hack/workflows-tools.sh); Prometheus Alertmanager (hack/alertmanager-tools.sh);
# the helm CLI (hack/helm-tools.sh); cyclonedx-gomod for the release's SBOM (hack/sbom-tools.sh); Debian's Chromium and the UI bundle's npm packages (hack/ui-tools.sh); Argo CD's own
# web UI, v3.6.1's and v2.14.21's, with the argocd binaries that embed it (hack/argocd-ui.sh, after tools-argocd).
# The scripts are independent (each its own binaries, stamps and CRD directories; apt-get serialised by a lock), so two
# run at once: a cold build spends part of each tool's time in a single-threaded link or module load, which the other
# build fills. Longest first (Flux, Argo CD, the kube binaries); output is grouped per script.
# The Go compiler, linker and vet of the tool builds (and of go test in `make test`, hack/test-suite.sh) run with
# GOGC=$(BUILD_GOGC): they collect garbage less often, which cut a cold build's CPU time by a fifth (helm-controller
# v0.37.2: 170 s of user time with the default GOGC=100, 132 s with 800; its largest compile process 0.8 GB instead of
# 0.45 GB), at no cost to the binaries built.
TOOLS_JOBS ?= 2
BUILD_GOGC ?= 800
TOOLS := tools-flux tools-argocd tools-kube tools-workflows tools-helm tools-alertmanager tools-ui tools-argocd-ui tools-sbom
tools:
	GOGC=$(BUILD_GOGC) $(MAKE) --no-print-directory -j$(TOOLS_JOBS) --output-sync=target $(TOOLS)
	@echo "tools: ready in $(BIN): $$(ls '$(BIN)' | tr '\n' ' ')"

tools-kube:
	./hack/tools.sh

tools-flux:
	./hack/flux-tools.sh

tools-argocd:
	./hack/argocd-tools.sh

# Argo CD's own web UI (v3.6.1 and v2.14.21) built from the modules' ui/ sources (hack/argocd-ui.sh: pnpm or yarn from
# the npm registry, the argo-ui commit from the repository vendored in internal/testenv/argoui, webpack; minutes cold,
# cached by a stamp), and bin/argocd-V-ui embedding it, for the browser tests of the UI extension inside the real Argo
# CD UI. After tools-argocd: the embedding build reuses that build's cache.
tools-argocd-ui: tools-argocd
	./hack/argocd-ui.sh

# Only the UI extension's tests inside Argo CD's own web UI (v3.6.1 and v2.14.21) in Chromium (`make test` runs them
# with the rest).
test-argocd-ui: tools
	KUBEBUILDER_ASSETS=$(BIN) SYNCMEDIC_BIN=$(BIN) go test -count=1 -timeout 30m -run 'InArgoCDsOwnUI' ./cmd/syncmedic

tools-workflows:
	./hack/workflows-tools.sh

tools-alertmanager:
	./hack/alertmanager-tools.sh

tools-helm:
	./hack/helm-tools.sh

tools-sbom:
	./hack/sbom-tools.sh

tools-ui:
	./hack/ui-tools.sh

# The whole suite (hack/test-suite.sh, after the tools and the chart): unit tests with the fuzz seed corpora and
# end-to-end tests against the real control plane (every package of ./..., in the order hack/test-packages.sh gives:
# the real node's longest user first, so that no slot of `go test` waits for the node while the other holds it), then
# the check that the run's compatibility matrix is the committed docs/compat.md (compat-check; `make compat` rewrites
# it after an intended change); every fuzz target runs for FUZZTIME beside them, at the lowest CPU priority.
# Each phase's wall-clock time is printed as it ends and kept in PHASES (hack/phase.sh).
PHASES := $(BIN)/test-phases.txt
test:
	@mkdir -p '$(BIN)'; rm -f '$(PHASES)'
	./hack/phase.sh '$(PHASES)' tools $(MAKE) tools
	./hack/phase.sh '$(PHASES)' chart $(MAKE) chart
	rm -rf '$(COMPAT_DIR)'
	PHASES='$(PHASES)' BIN='$(BIN)' COMPAT_DIR='$(COMPAT_DIR)' FUZZTIME='$(FUZZTIME)' BUILD_GOGC='$(BUILD_GOGC)' ./hack/test-suite.sh
	@echo "make test: every phase passed:"; cat '$(PHASES)'

# The Helm chart as a release ships it: `helm lint --strict`, then `helm package` into CHART_DIST
# (syncmedic-<version>.tgz; push it with `helm push CHART_DIST/syncmedic-<version>.tgz oci://<registry>/<path>`).
HELM ?= $(BIN)/helm
CHART_DIST ?= $(BIN)/chart
chart:
	'$(HELM)' lint --strict charts/syncmedic
	'$(HELM)' package charts/syncmedic --destination '$(CHART_DIST)'

# Where the real-controller tests (internal/conformance) record their rows in `make test`.
COMPAT_DIR ?= $(BIN)/compat

# docs/compat.md from the rows the real-controller tests (internal/conformance) recorded in the last `make test`.
# Fails when no rows were recorded (the file is then left as it is), when a row was skipped or failed, or when a test
# of the committed matrix recorded no row (COMPAT_FLAGS=-allow-missing after removing or renaming a scenario).
compat:
	go run ./internal/conformance/compatdoc -in '$(COMPAT_DIR)' -out docs/compat.md -extra internal/conformance/unbuildable.md $(COMPAT_FLAGS)

# docs/compat.md regenerated from the last `make test`'s rows (into $(COMPAT_CHECK_OUT), docs/ left alone) must be the
# committed file (git HEAD): fails with a word diff on any difference, and, as `make compat` does, when a row was skipped
# or failed, when a test of the committed matrix recorded no row, or when no row was recorded at all.
COMPAT_CHECK_OUT := $(BIN)/compat-check.md
compat-check:
	@mkdir -p $(BIN); rm -f '$(COMPAT_CHECK_OUT)'; \
	git show HEAD:docs/compat.md > '$(COMPAT_CHECK_OUT).committed' || { echo "compat-check: no committed docs/compat.md" >&2; exit 1; }; \
	cp '$(COMPAT_CHECK_OUT).committed' '$(COMPAT_CHECK_OUT)'; \
	rc=0; go run ./internal/conformance/compatdoc -in '$(COMPAT_DIR)' -out '$(COMPAT_CHECK_OUT)' \
	  -extra internal/conformance/unbuildable.md $(COMPAT_FLAGS) || rc=1; \
	if ! git --no-pager diff --no-index --no-color --word-diff=plain -U0 '$(COMPAT_CHECK_OUT).committed' '$(COMPAT_CHECK_OUT)'; then \
	  echo "compat-check: the matrix of this run differs from the committed docs/compat.md (diff above, [-committed-]{+this run+});" >&2; \
	  echo "if the change is intended: cp $(COMPAT_CHECK_OUT) docs/compat.md and commit it" >&2; rc=1; \
	fi; \
	if [ $$rc = 0 ]; then echo "compat-check: docs/compat.md is the committed file, every row passed"; fi; \
	exit $$rc

# Every fuzz target for FUZZTIME each; failing inputs land in the package's testdata/fuzz.
fuzz:
	FUZZTIME=$(FUZZTIME) ./hack/fuzz.sh

# The generated sections of docs/ (between `<!-- BEGIN GENERATED: name -->` and its END marker), rewritten from the
# code: every command's flags (docs/cli.md, from cobra), the rule catalog (docs/rules.md), the chart's values
# (docs/install-helm.md, from values.schema.json's descriptions and values.yaml), the RBAC tables and the Argo CD
# policy (docs/install-kustomize.md, from manifests/base and manifests/components/argocd-account). The same tests,
# without -update, are part of `make test` (and `make test-unit`): they fail while a committed page differs.
docs:
	go test -count=1 -run '^TestGeneratedDocs$$' ./cmd/syncmedic ./manifests -args -update

# Only the fast unit tests: no control plane needed.
test-unit:
	go test -short -count=1 ./...

# The container image, built without a container engine (hack/image, internal/imagebuild, go-containerregistry): the static syncmedic
# binary, Debian's CA certificates (package ca-certificates) and /etc/passwd and /etc/group with the user 65532,
# nothing else, as an OCI image layout in dist/oci and one archive, dist/syncmedic-image.tar (`ctr -n k8s.io images
# import`, `kind load image-archive`, `docker load -i`, `crane push`); it prints the image's digest.
# `make image IMAGE=registry.example.com/syncmedic:v0.2.0`. VERSION (default: IMAGE's tag) is stamped into `syncmedic
# version`; REVISION (default: the Git commit) labels the image; PLATFORMS (comma-separated linux/<arch>, default
# linux/amd64 and the host's) picks the architectures. Reproducible: the same source, VERSION, REVISION and
# SOURCE_DATE_EPOCH (default 0) give the same digest. Then push it and point the manifests at it:
# docs/install-kustomize.md, "Build and use your own image".
IMAGE ?= ghcr.io/syncmedic/syncmedic:v0.1.0
VERSION ?= $(lastword $(subst :, ,$(IMAGE)))
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
PLATFORMS ?=
.PHONY: image image-docker
image:
	go run ./hack/image -name '$(IMAGE)' -version '$(VERSION)' -revision '$(REVISION)' -platforms '$(PLATFORMS)' -out dist

# The same file tree with docker buildx (Dockerfile): --load into the local engine, or --push with PUSH=1
# (PLATFORMS=linux/amd64,linux/arm64 needs PUSH=1).
image-docker:
	docker buildx build --platform '$(or $(PLATFORMS),linux/amd64)' --build-arg VERSION='$(VERSION)' \
	  --build-arg REVISION='$(REVISION)' -t '$(IMAGE)' $(if $(PUSH),--push,--load) .

# A release, into RELEASE_DIST (emptied first; hack/release, internal/release): `make release VERSION=v0.1.0`.
# Static binaries syncmedic_<VERSION>_<os>_<arch> for linux and darwin on amd64 and arm64 (the image's build flags,
# stamped with VERSION, the Git commit and the build date: SOURCE_DATE_EPOCH, else the commit's time); the image index
# (linux/amd64 and linux/arm64, the same binaries) as an OCI layout, syncmedic_<VERSION>_oci, and its archive,
# syncmedic_<VERSION>_image.tar; the chart, syncmedic-<VERSION without v>.tgz, appVersion VERSION (the image tag);
# install.yaml and install-<variant>.yaml, the kustomize installs rendered with the image tagged VERSION; a CycloneDX
# SBOM per binary (cyclonedx-gomod); provenance.txt (`go version -m` of each binary); checksums.txt (sha256sum -c).
# Cold, each platform other than linux/amd64 compiles every dependency once (minutes each: docs/development.md).
RELEASE_DIST ?= dist
release: tools-helm tools-sbom
	GOGC=$(BUILD_GOGC) go run ./hack/release -version '$(VERSION)' -out '$(RELEASE_DIST)' -helm '$(HELM)' -sbom-tool '$(BIN)/cyclonedx-gomod'

# docs/screenshots/*.png from the browser tests (headless Chromium against `serve` and the Argo CD extension).
.PHONY: screenshots
screenshots: tools
	./hack/ui-tools.sh screenshots

# The ratio benchmarks against their floors (bench/check: receiver ≥ 0.85 of bare net/http, watch ≤ 1.6 × decode-only
# CPU, a 50,000-object scan ≤ 200 MB of live heap, ≤ 5 KiB of heap per watched application). It writes
# bench/results/check-*.json and regenerates bench/README.md's bench-check section from it; exit 1 when a figure is
# past its floor. Not part of `make test` (a busy machine moves the ratios): run it on a quiet machine after a change
# to the receiver, the watcher, the tracker, the snapshot reader or the rules. About 5 minutes on 2 cores.
.PHONY: bench-check
bench-check:
	go run ./bench/check
