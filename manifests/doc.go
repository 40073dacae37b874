// Package manifests holds the tests of the kustomize manifests in this directory (base/, argocd-cmp/, flux/): they
// build with the kustomize library and apply to a real kube-apiserver, and the ServiceAccount's permissions are
// checked with SubjectAccessReview and, for the Argo CD account, against a real argocd-server.
package manifests
