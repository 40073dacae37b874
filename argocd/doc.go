// Package argocd owns everything syncmedic does with Argo CD: the API client, the application watch, the Argo CD
// rules of the failure catalog, the remedies applied through the Argo CD API, and the CMP manifest lint.
package argocd
