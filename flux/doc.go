// Package flux owns everything syncmedic does with Flux: the HelmRelease watch, the receiver for the events
// notification-controller posts, the Flux rules of the failure catalog, and reconcile requests written the way the
// flux CLI writes them.
package flux
