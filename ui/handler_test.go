package ui

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden.json")
	if *update {
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./ui -update to create it")
	require.Equal(t, string(want), string(got))
}

// newServer serves the handlers the way serve does: on one ServeMux, with the fixture incidents.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	hs, err := Handlers(Options{Incidents: fixtureIncidents, Token: []byte(apiToken), ProxyToken: []byte(proxyToken)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for p, h := range hs {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, method, path string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, body
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// viaArgoCD is what argocd-server's proxy extension sends: the configured Authorization header (the proxy token),
// the Application the user is looking at and the user.
func viaArgoCD(app, project string) http.Header {
	h := bearer(proxyToken)
	h.Set("Argocd-Application-Name", app)
	h.Set("Argocd-Project-Name", project)
	h.Set("Argocd-Username", "alice")
	h.Set("Argocd-Namespace", "argocd")
	return h
}

func ids(t *testing.T, body []byte) []string {
	t.Helper()
	var list IncidentList
	require.NoError(t, json.Unmarshal(body, &list))
	out := []string{}
	for _, inc := range list.Items {
		out = append(out, inc.Object.Namespace+"/"+inc.Object.Name+":"+inc.State)
	}
	return out
}

func TestIncidentListGolden(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct{ name, query, golden string }{
		{"without a state the open incidents are listed, oldest first", "", "list-open"},
		{"state=all adds the recent resolved incidents after the open ones", "?state=all", "list-all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, http.MethodGet, IncidentsPath+tc.query, bearer(apiToken))
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			golden(t, tc.golden, body)
		})
	}
}

func TestIncidentListFilters(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		want   []string
	}{
		{"app matches the Argo CD application's name", "?app=checkout", bearer(apiToken), []string{"shop/migrate:firing", "shop/seed:firing"}},
		{"app matches namespace/name", "?app=argocd/checkout", bearer(apiToken), []string{"shop/migrate:firing"}},
		{"app in another namespace matches nothing", "?app=team-a/checkout", bearer(apiToken), []string{}},
		{"project matches resolved incidents when state=all", "?project=finance&state=all", bearer(apiToken), []string{"billing/migrate:resolved"}},
		{"state=resolved lists only resolved incidents", "?state=resolved", bearer(apiToken), []string{"billing/migrate:resolved"}},
		{"namespace is the object's namespace", "?namespace=apps", bearer(apiToken), []string{"apps/podinfo:remediating"}},
		{"rule and namespace select a cluster check", "?rule=kube/stuck-terminating&namespace=shop", bearer(apiToken), []string{"shop/seed:firing"}},
		{"release matches the HelmRelease by name", "?release=podinfo", bearer(apiToken), []string{"apps/podinfo:remediating"}},
		{"release matches the HelmRelease by namespace/name", "?release=apps/podinfo", bearer(apiToken), []string{"apps/podinfo:remediating"}},
		{"rule matches the rule ID", "?rule=argocd/hook-finalizer-stuck&state=all", bearer(apiToken), []string{"shop/migrate:firing", "billing/migrate:resolved"}},
		{"filters combine", "?rule=argocd/hook-finalizer-stuck&namespace=apps", bearer(apiToken), []string{}},
		{"a request through Argo CD sees only its application, tracked objects included", "?state=all", viaArgoCD("argocd:checkout", "payments"), []string{"shop/migrate:firing", "shop/seed:firing"}},
		{"a request through Argo CD cannot widen its scope with a filter", "?app=billing&state=all", viaArgoCD("argocd:checkout", "payments"), []string{}},
		{"a request through Argo CD for another project sees only what does not name a project", "?state=all", viaArgoCD("argocd:checkout", "finance"), []string{"shop/seed:firing"}},
		{"a request through Argo CD for an app in another namespace sees only what does not name one", "", viaArgoCD("team-a:checkout", "payments"), []string{"shop/seed:firing"}},
		{"a request through Argo CD for an app nothing names sees nothing", "?state=all", viaArgoCD("argocd:cart", "payments"), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, http.MethodGet, IncidentsPath+tc.query, tc.header)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			require.Equal(t, tc.want, ids(t, body))
		})
	}
}

func TestIncidentGet(t *testing.T) {
	srv := newServer(t)
	incs := fixtureIncidents()
	open, resolved := incs[0].ID, incs[3].ID
	t.Run("an incident is found by its ID", func(t *testing.T) {
		res, body := get(t, srv, http.MethodGet, IncidentsPath+"/"+open, bearer(apiToken))
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		golden(t, "get-open", body)
	})
	for _, tc := range []struct {
		name   string
		id     string
		header http.Header
		want   int
	}{
		{"a resolved incident is still found by its ID", resolved, bearer(apiToken), http.StatusOK},
		{"an unknown ID is not found", "0123456789abcdef-1", bearer(apiToken), http.StatusNotFound},
		{"a request through Argo CD finds its application's incident", open, viaArgoCD("argocd:checkout", "payments"), http.StatusOK},
		{"a request through Argo CD does not find another application's incident", resolved, viaArgoCD("argocd:checkout", "payments"), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, http.MethodGet, IncidentsPath+"/"+tc.id, tc.header)
			require.Equal(t, tc.want, res.StatusCode, string(body))
		})
	}
}

func TestIncidentAPIRefuses(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		header http.Header
		want   int
		errRe  string
	}{
		{"a request without a token is unauthorized", http.MethodGet, IncidentsPath, nil, http.StatusUnauthorized, "bearer token is required"},
		{"a request with a wrong token is unauthorized", http.MethodGet, IncidentsPath, bearer("guess"), http.StatusUnauthorized, "bearer token is required"},
		{"a request with the token as basic auth is unauthorized", http.MethodGet, IncidentsPath, http.Header{"Authorization": {"Basic " + apiToken}}, http.StatusUnauthorized, "bearer token"},
		{"Argo CD headers without the token are unauthorized", http.MethodGet, IncidentsPath, http.Header{"Argocd-Application-Name": {"argocd:checkout"}, "Argocd-Project-Name": {"payments"}}, http.StatusUnauthorized, "bearer token"},
		{"an application header without a project is a bad request", http.MethodGet, IncidentsPath, http.Header{"Authorization": {"Bearer " + proxyToken}, "Argocd-Application-Name": {"argocd:checkout"}}, http.StatusBadRequest, "must be given together"},
		{"an application header without a namespace is a bad request", http.MethodGet, IncidentsPath, viaArgoCD("checkout", "payments"), http.StatusBadRequest, "namespace:name"},
		{"an unknown query parameter is a bad request", http.MethodGet, IncidentsPath + "?application=checkout", bearer(apiToken), http.StatusBadRequest, `unknown query parameter "application"`},
		{"an unknown state is a bad request", http.MethodGet, IncidentsPath + "?state=closed", bearer(apiToken), http.StatusBadRequest, `state "closed"`},
		{"a repeated parameter is a bad request", http.MethodGet, IncidentsPath + "?app=a&app=b", bearer(apiToken), http.StatusBadRequest, "given 2 times"},
		{"POST to the list is not allowed: incidents are read with GET", http.MethodPost, IncidentsPath, bearer(apiToken), http.StatusMethodNotAllowed, "a fix is requested with POST"},
		{"DELETE of an incident is not allowed", http.MethodDelete, IncidentsPath + "/x", bearer(apiToken), http.StatusMethodNotAllowed, "incidents are read with GET"},
		{"a fix is refused when serve runs the API read-only", http.MethodPost, IncidentsPath + "/x" + FixSuffix, bearer(apiToken), http.StatusNotImplemented, "read-only"},
		{"a fix is not read with GET", http.MethodGet, IncidentsPath + "/x" + FixSuffix, bearer(apiToken), http.StatusMethodNotAllowed, "POST"},
		{"watch takes true or false", http.MethodGet, IncidentsPath + "?watch=yes", bearer(apiToken), http.StatusBadRequest, `watch "yes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, tc.method, tc.path, tc.header)
			require.Equal(t, tc.want, res.StatusCode, string(body))
			var e Error
			require.NoError(t, json.Unmarshal(body, &e))
			require.Regexp(t, regexp.QuoteMeta(tc.errRe), e.Error)
			if tc.want == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="syncmedic"`, res.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestIncidentAPILeaksNoSecret(t *testing.T) {
	srv := newServer(t)
	incs := fixtureIncidents()
	for _, path := range []string{IncidentsPath + "?state=all", IncidentsPath + "/" + incs[0].ID, IncidentsPath + "?state=bogus", IncidentsPath + "/nope"} {
		for _, h := range []http.Header{bearer(apiToken), bearer("wrong"), viaArgoCD("argocd:checkout", "payments")} {
			t.Run("GET "+path+" answers without a token or a notifier's note", func(t *testing.T) {
				_, body := get(t, srv, http.MethodGet, path, h)
				for _, secret := range []string{slackToken, argocdToken, apiToken, "slack.ts", "1773144000.000100", `"patch"`} {
					require.NotContains(t, string(body), secret)
				}
			})
		}
	}
}

func TestIncidentPage(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct{ name, path, contentType, contains string }{
		{"the page is served without a token (it holds no data)", "/ui/", "text/html; charset=utf-8", `<script src="app.js">`},
		{"its script is served from the same origin", "/ui/app.js", "text/javascript; charset=utf-8", "../api/v1/incidents"},
		{"its style sheet is served from the same origin", "/ui/style.css", "text/css; charset=utf-8", ".incident"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, http.MethodGet, tc.path, nil)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, tc.contentType, res.Header.Get("Content-Type"))
			require.Contains(t, string(body), tc.contains)
			require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
			require.NotRegexp(t, `(src|href)="(https?:)?//`, string(body), "no external asset")
		})
	}
	t.Run("no asset refers to another origin", func(t *testing.T) {
		entries, err := assets.ReadDir("static")
		require.NoError(t, err)
		for _, e := range entries {
			b, err := assets.ReadFile("static/" + e.Name())
			require.NoError(t, err)
			require.False(t, strings.Contains(string(b), "://"), "%s refers to another origin", e.Name())
		}
	})
}

func TestHandlersNeedTokenAndIncidents(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		err  string
	}{
		{"without a token the API is not served", Options{Incidents: fixtureIncidents}, "needs an API token"},
		{"without incidents the API is not served", Options{Token: []byte(apiToken)}, "incidents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Handlers(tc.o)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
