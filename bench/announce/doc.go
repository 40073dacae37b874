// Command announce measures syncmedic's time to announce on the real controllers: from the moment a stuck
// condition crosses its threshold to the Slack chat.postMessage that opens its thread.
//
// It starts the test control plane of internal/testenv outside `go test` (testenv.Standalone): a real
// kube-apiserver, etcd and kube-controller-manager, the real Argo CD stack as processes (application-controller,
// repo-server, argocd-server, redis) and a recording Slack server; it creates -healthy Applications that the real
// controller syncs and keeps in sync, starts the real `syncmedic serve` watching all of them, then makes -stuck
// Applications stuck by the controller's own mechanism (a sync waiting for the deletion of an old hook Job that a
// foreign finalizer holds: argocd/hook-not-deleted) and times each announcement.
package main
