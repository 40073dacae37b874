package ui

// The headers argocd-server's extension proxy sets on every request it forwards to a proxy extension (Argo CD's
// server/extension package; TestHeaderNamesAreArgoCDs compares them with it). They are honoured only on requests with
// the proxy token (auth.go), and refused on requests with an API token. argocd-server replaces the browser's copies
// of the application and project headers after checking them against the user's rights, but sets the user and
// groups only when the user's token has them.
const (
	headerApplicationName = "Argocd-Application-Name"
	headerProjectName     = "Argocd-Project-Name"
	headerUsername        = "Argocd-Username"
	headerGroups          = "Argocd-User-Groups"
)
