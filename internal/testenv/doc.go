// Package testenv is the shared end-to-end test harness: a real kube-apiserver and etcd (controller-runtime envtest)
// with the Argo CD, Flux and Argo Workflows CRDs, real redis-server processes, the real argocd-server and cmp-server
// in-process, and scenario builders that put each seed incident into the apiserver.
package testenv
