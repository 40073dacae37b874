// Package argoapi holds a copy of the Argo CD API that syncmedic calls: the Application types (v1alpha1), the
// ApplicationService and ApplicationSetService gRPC clients (application, applicationset) and the gitops-engine enums they use (synccommon, health), generated
// by ./gen from the pinned argo-cd/v2 and gitops-engine modules without the server-side helpers that made the
// upstream packages pull Helm, go-git, kubectl and k8s.io/kubernetes into the binary (issue 16 item 5). The wire
// format is Argo CD's: the messages are the generated ones, field for field.
package argoapi

//go:generate go run ./gen
