package ui

// The headers argocd-server's extension proxy sets on every request it forwards to a proxy extension (Argo CD's
// server/extension package; TestHeaderNamesAreArgoCDs compares them with it). They are trusted only behind the shared
// secret header (auth.go): argocd-server drops the browser's copies and sets its own.
const (
	headerApplicationName = "Argocd-Application-Name"
	headerProjectName     = "Argocd-Project-Name"
	headerUsername        = "Argocd-Username"
	headerGroups          = "Argocd-User-Groups"
)
