// Package fluxnc runs Flux's real notification-controller (bin/notification-controller, built by
// hack/flux-tools.sh) against the testenv apiserver, and creates the generic-hmac Provider and Alert that forward
// HelmRelease events to a receiver, so end-to-end tests take the production path of a Flux event.
package fluxnc
