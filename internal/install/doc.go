// Package install holds the install tests: syncmedic installed on the real node (internal/testenv RealNode) the way
// the install pages (docs/install-kustomize.md, docs/install-helm.md) say, beside Flux (and, later, Argo CD) running as Pods from their upstream manifests. It has no code of
// its own besides these tests.
package install
