package ui

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

type scopeKey struct{}

// authenticate lets a request through only with the bearer token, and stores the caller's scope in its context.
//
// Direct callers send "Authorization: Bearer <token>" and see every incident. The Argo CD proxy extension sends the
// same header (configured in argocd-cm extension.config from an argocd-secret key; argocd-server drops the browser's
// own Authorization and Cookie headers) together with the Application the user is looking at, which argocd-server
// has authorized for that user (applications get, extensions invoke): such a request sees only that Application's
// incidents. The token is never logged.
func authenticate(token func() []byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), token()) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="syncmedic"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)")
			return
		}
		s, err := proxyScope(r.Header)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, s)))
	})
}

// proxyScope reads the Application of an Argo CD proxy extension request ("Argocd-Application-Name:
// namespace:name", "Argocd-Project-Name: project"); a request without them is not scoped.
func proxyScope(h http.Header) (scope, error) {
	app, project := h.Get(headerApplicationName), h.Get(headerProjectName)
	if app == "" && project == "" {
		return scope{}, nil
	}
	ns, name, ok := strings.Cut(app, ":")
	if !ok || ns == "" || name == "" || project == "" {
		return scope{}, fmt.Errorf("headers %s (namespace:name) and %s must be given together",
			headerApplicationName, headerProjectName)
	}
	return scope{app: name, appNamespace: ns, project: project}, nil
}

func scopeOf(ctx context.Context) scope {
	s, _ := ctx.Value(scopeKey{}).(scope)
	return s
}
