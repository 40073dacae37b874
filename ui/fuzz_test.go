package ui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseFilter: any query string either parses into a filter whose state is one of the three, or is refused;
// it never panics, and a parsed filter never matches a resolved incident under state=open.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "state=all", "app=argocd/checkout&state=resolved", "release=apps/podinfo", "rule=x&rule=y", "bogus=1", "state=%zz"} {
		f.Add(s)
	}
	incs := fixtureIncidents()
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := parseFilter(q)
		if err != nil {
			return
		}
		switch flt.State {
		case "open", "resolved", "all":
		default:
			t.Fatalf("state %q accepted", flt.State)
		}
		for i := range incs {
			if flt.State == "open" && !incs[i].IsOpen() && flt.Match(&incs[i]) {
				t.Fatalf("state=open matched resolved incident %s", incs[i].ID)
			}
		}
	})
}

// FuzzProxyScope: the Argo CD headers either name one application (with a namespace and a project) or are refused;
// a scoped request never sees an incident of another application.
func FuzzProxyScope(f *testing.F) {
	f.Add("argocd:checkout", "payments")
	f.Add("checkout", "payments")
	f.Add(":", "")
	f.Add("a:b:c", "p")
	incs := fixtureIncidents()
	f.Fuzz(func(t *testing.T, app, project string) {
		h := http.Header{}
		h.Set("Argocd-Application-Name", app)
		h.Set("Argocd-Project-Name", project)
		s, err := proxyScope(h)
		if err != nil {
			return
		}
		if s.app == "" {
			if strings.TrimSpace(h.Get("Argocd-Application-Name")) != "" {
				t.Fatalf("application header %q gave an unscoped request", app)
			}
			return
		}
		for i := range incs {
			if s.allows(&incs[i]) && incs[i].Finding.Object.App != s.app {
				t.Fatalf("scope %+v allows incident of app %q", s, incs[i].Finding.Object.App)
			}
		}
	})
}

// FuzzFixRequest: any body posted to an incident's fix is answered with a status the API documents, never a panic,
// and nothing is ever applied without the confirm of the plan just given.
func FuzzFixRequest(f *testing.F) {
	for _, s := range []string{"", "{}", `{"confirm": ""}`, `{"confirm": "sha256:0"}`, `{"confirm": 1}`, "null", "[]", `{"confirm": "x", "extra": [1, 2]}`, "{", "\x00"} {
		f.Add(s)
	}
	r := newFixRig(f)
	f.Fuzz(func(t *testing.T, body string) {
		res, out := r.post(t, r.checkout, body, bearer(apiToken))
		switch res.StatusCode {
		case http.StatusOK, http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", res.StatusCode, body, out)
		}
		if r.rem.realCalls() != 0 {
			t.Fatalf("a fix was applied without the plan's confirm (body %q)", body)
		}
	})
}
