package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/policy"
)

type scopeKey struct{}

type callerKey struct{}

// authenticator lets a request through only with a valid bearer token, and stores who asks and what they may see in
// its context.
//
// Direct callers send "Authorization: Bearer <API token>", see every incident and act as the token's holder
// ("token:<name>" for a named token); any Argocd-* header on such a request is refused, so that no holder of an API
// token can pose as an Argo CD user. The Argo CD proxy extension sends the proxy token instead (configured in
// argocd-cm extension.config from an argocd-secret key; argocd-server drops the browser's own Authorization and Cookie
// headers) together with the Application the user is looking at, which argocd-server has authorized for that user
// (applications get, extensions invoke), and the user: such a request sees only that Application's incidents, acts
// as that Argo CD user, and may change nothing without one. Tokens are never logged.
type authenticator struct {
	api   *tokenSource
	proxy *tokenSource // nil: no proxy token, every Argocd-* header is refused
	// policy decides whether the groups the proxy forwards count (trustProxyGroups); nil: they do not.
	policy func() *policy.Policy
	limit  *failureLimiter
}

func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientAddress(r)
		// Before the token is compared: an address that keeps guessing learns nothing more until it waits.
		if wait, ok := a.limit.blocked(client); ok {
			w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("more than %d requests a minute from %s without a valid bearer token; wait and retry with a valid one",
				maxUnauthorizedPerMinute, client))
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		secret := []byte(strings.TrimSpace(got))
		var c policy.Caller
		var s scope
		code, msg := http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)"
		if ok {
			if _, proxied := a.proxyCredentials().match(secret); proxied {
				c, s, code, msg = a.proxied(r)
			} else if cred, found := a.api.get().match(secret); found {
				c, code, msg = direct(r, cred)
			}
		}
		if code == http.StatusUnauthorized {
			a.limit.fail(client)
			w.Header().Set("WWW-Authenticate", `Bearer realm="syncmedic"`)
		}
		if code != http.StatusOK {
			writeError(w, code, msg)
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), scopeKey{}, s), callerKey{}, c)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (a *authenticator) proxyCredentials() credentials {
	if a.proxy == nil {
		return nil
	}
	return a.proxy.get()
}

// direct authenticates a request with an API token: it sees everything, as the token's holder, and may not carry the
// headers only argocd-server's proxy extension may set.
func direct(r *http.Request, cred credential) (policy.Caller, int, string) {
	for k := range r.Header {
		if strings.HasPrefix(k, "Argocd-") {
			return policy.Caller{}, http.StatusBadRequest, "header " + k + " is honoured only on requests argocd-server's proxy extension " +
				"sends with the proxy token (--proxy-token-file); a request with the API token acts as the token's holder: remove the Argocd-* headers"
		}
	}
	return policy.Caller{Token: cred.name, Via: policy.ViaAPIToken}, http.StatusOK, ""
}

// proxied authenticates a request with the proxy token: it sees only its Application and acts as the Argo CD user
// argocd-server forwards (with the groups only when the policy trusts them); a change needs that user.
func (a *authenticator) proxied(r *http.Request) (policy.Caller, scope, int, string) {
	s, err := proxyScope(r.Header)
	if err != nil {
		return policy.Caller{}, scope{}, http.StatusBadRequest, err.Error()
	}
	if s.app == "" {
		return policy.Caller{}, scope{}, http.StatusBadRequest, "a request with the proxy token needs headers " + headerApplicationName +
			" (namespace:name) and " + headerProjectName + ", which argocd-server's proxy extension sets; direct callers use an API token"
	}
	user := strings.TrimSpace(r.Header.Get(headerUsername))
	if user == "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return policy.Caller{}, scope{}, http.StatusForbidden, "a change through Argo CD needs the user (" + headerUsername +
			"), which argocd-server sets for a logged-in user: log in to Argo CD; anonymous access may only read"
	}
	c := policy.Caller{User: user, Via: policy.ViaArgoCDExtension}
	if a.policy != nil && user != "" {
		if p := a.policy(); p != nil && p.TrustProxyGroups {
			for _, g := range strings.Split(r.Header.Get(headerGroups), ",") {
				if g = strings.TrimSpace(g); g != "" {
					c.Groups = append(c.Groups, g)
				}
			}
		}
	}
	return c, s, http.StatusOK, ""
}

// proxyScope reads the Application of an Argo CD proxy extension request ("Argocd-Application-Name:
// namespace:name", "Argocd-Project-Name: project"); without them the scope is empty.
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

// caller names who asks, as the authenticator found it.
func caller(r *http.Request) policy.Caller {
	c, _ := r.Context().Value(callerKey{}).(policy.Caller)
	return c
}

// newAuthenticator checks the tokens of o (each long enough, the proxy token none of the API tokens).
func newAuthenticator(o Options) (*authenticator, error) {
	if len(o.Token) == 0 && o.TokenSource == nil {
		return nil, errors.New("the incident API needs an API token")
	}
	api, err := newTokenSource("API token file", contentOf(o.Token, o.TokenSource), parseAPITokens, o.Log)
	if err != nil {
		return nil, err
	}
	a := &authenticator{api: api, policy: o.Policy, limit: newFailureLimiter(o.now)}
	if len(o.ProxyToken) == 0 && o.ProxyTokenSource == nil {
		return a, nil
	}
	if a.proxy, err = newTokenSource("proxy token file", contentOf(o.ProxyToken, o.ProxyTokenSource), parseProxyToken, o.Log); err != nil {
		return nil, err
	}
	if c, same := api.get().match(a.proxy.get()[0].secret); same {
		who := "the API token"
		if c.name != "" {
			who = "the API token of " + strconv.Quote(c.name)
		}
		return nil, errors.New("the proxy token is " + who + ": give argocd-server its own token (openssl rand -hex 32), or every holder of the API token could pose as any Argo CD user")
	}
	return a, nil
}

// contentOf returns source, or a function returning fixed.
func contentOf(fixed []byte, source func() []byte) func() []byte {
	if source != nil {
		return source
	}
	return func() []byte { return fixed }
}
