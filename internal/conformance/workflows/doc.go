// Package workflows holds the Argo Workflows conformance tests: `syncmedic serve` on the cluster checks against the
// real workflow-controller (internal/testenv/wfreal), each recorded as a row of docs/compat.md.
package workflows
