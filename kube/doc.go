// Package kube owns the cluster checks shared by Argo CD and Flux users: objects stuck terminating, admission
// webhooks whose backend is gone or that a Namespace owns, and Argo Workflows held by the artifact-gc finalizer.
package kube
