// Package manifests holds the tests of the install artefacts: the kustomize manifests in this directory (base/, flux/,
// argocd-cmp/, components/), the Helm chart in charts/syncmedic and the Dockerfile. They build with the kustomize
// library and the real helm CLI and apply to a real kube-apiserver; the ServiceAccount's permissions are checked with
// SubjectAccessReview and, for the Argo CD account, against a real argocd-server.
package manifests
