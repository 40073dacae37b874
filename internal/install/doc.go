// Package install holds the install tests: syncmedic installed on the real node (internal/testenv RealNode) the way
// the README says, beside Flux (and, later, Argo CD) running as Pods from their upstream manifests. It has no code of
// its own besides these tests.
package install
