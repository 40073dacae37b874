package argocd

import "github.com/syncmedic/syncmedic/internal/argoapi/application"

// AppRef names an application for the calls that act on it: its name, its namespace ("" for the control-plane
// namespace) and its project.
type AppRef struct{ Name, Namespace, Project string }

// String returns "namespace/name", or the name alone without a namespace.
func (t AppRef) String() string {
	if t.Namespace == "" {
		return t.Name
	}
	return t.Namespace + "/" + t.Name
}

// Query returns the ApplicationQuery that names the application.
func (t AppRef) Query() *application.ApplicationQuery {
	q := &application.ApplicationQuery{Name: &t.Name}
	if t.Namespace != "" {
		q.AppNamespace = &t.Namespace
	}
	return q
}
