// Package fluxreal runs Flux's real source-controller and helm-controller (old and new, built by
// hack/flux-tools.sh) as processes against the testenv apiserver, serves a Helm repository of charts the tests
// package with the Helm SDK, and drives the Flux scenarios — dependencies not ready, retries exhausted, a status
// inherited across a controller upgrade, and their healthy near misses — through their real mechanisms.
package fluxreal
