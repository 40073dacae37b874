// Package conformance records what the real Argo CD and Flux controllers did in each scenario of the real-controller
// tests (its subpackages), and what syncmedic reported about it, and renders those rows as docs/compat.md.
package conformance
