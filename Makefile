# syncmedic — build and test entry points. `make test` is the one command that runs the whole suite; it first
# installs what a fresh machine lacks (Debian redis-server, and the control-plane binaries built with `go build`).
SHELL := /bin/bash
BIN := $(CURDIR)/bin

.PHONY: all build test test-unit tools tools-kube tools-flux fuzz

all: build

build:
	go build -o $(BIN)/syncmedic ./cmd/syncmedic

# Everything the end-to-end tests need: kube-apiserver, etcd, controller-gen, generated CRDs, redis-server
# (hack/tools.sh), and Flux's notification-controller (hack/flux-tools.sh).
tools: tools-kube tools-flux

tools-kube:
	./hack/tools.sh

tools-flux:
	./hack/flux-tools.sh

# The whole suite: unit, fuzz seed corpora, and end-to-end tests against the real control plane.
test: tools
	KUBEBUILDER_ASSETS=$(BIN) SYNCMEDIC_BIN=$(BIN) go test -count=1 -timeout 45m ./...

# Only the fast unit tests: no control plane needed.
test-unit:
	go test -short -count=1 ./...
