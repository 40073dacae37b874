// Package flux holds the Flux conformance tests: the scenarios driven by the real source-controller and
// helm-controller (internal/testenv/fluxreal), and `syncmedic serve` end to end on them with the real
// notification-controller, each recorded as a row of docs/compat.md.
package flux
