package ui

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testclock"
)

// withoutUser is a proxy extension request of checkout by a browser argocd-server knows no user of (anonymous
// access).
func withoutUser() http.Header {
	h := viaArgoCD("argocd:checkout", "payments")
	h.Del("Argocd-Username")
	return h
}

// withAPIToken is h with the API token instead of the proxy token: a holder of the API token posing as Argo CD.
func withAPIToken(h http.Header) http.Header {
	h = h.Clone()
	h.Set("Authorization", "Bearer "+apiToken)
	return h
}

func TestArgoCDHeadersAreHonouredOnlyWithTheProxyToken(t *testing.T) {
	r := newOnCallRig(t, onCallPolicy)
	ack := IncidentsPath + "/" + r.checkout + AckSuffix
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		header       http.Header
		want         int
		errPart      string
	}{
		{"the API token with a forged user is a bad request", http.MethodPost, ack, `{}`, withAPIToken(asSRE("bob", "sre")), http.StatusBadRequest, "header Argocd-"},
		{"the API token with only a forged user is a bad request", http.MethodGet, IncidentsPath, ``,
			http.Header{"Authorization": {"Bearer " + apiToken}, "Argocd-Username": {"admin"}}, http.StatusBadRequest, "header Argocd-Username is honoured only on requests argocd-server's proxy extension sends with the proxy token"},
		{"the API token with forged groups is a bad request", http.MethodGet, IncidentsPath, ``,
			http.Header{"Authorization": {"Bearer " + apiToken}, "Argocd-User-Groups": {"sre"}}, http.StatusBadRequest, "header Argocd-User-Groups is honoured only"},
		{"the API token with an application scope is a bad request", http.MethodGet, IncidentsPath, ``,
			withAPIToken(viaArgoCD("argocd:checkout", "payments")), http.StatusBadRequest, "remove the Argocd-* headers"},
		{"the proxy token without the application headers is a bad request", http.MethodGet, IncidentsPath, ``,
			http.Header{"Authorization": {"Bearer " + proxyToken}, "Argocd-Username": {"bob"}}, http.StatusBadRequest, "a request with the proxy token needs headers Argocd-Application-Name (namespace:name) and Argocd-Project-Name"},
		{"the proxy token alone is a bad request", http.MethodGet, IncidentsPath, ``, bearer(proxyToken), http.StatusBadRequest, "direct callers use an API token"},
		{"an acknowledgement through the proxy without a user is forbidden", http.MethodPost, ack, `{}`, withoutUser(), http.StatusForbidden, "a change through Argo CD needs the user (Argocd-Username)"},
		{"a silence through the proxy without a user is forbidden", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "1h", "comment": "x"}`,
			withoutUser(), http.StatusForbidden, "anonymous access may only read"},
		{"expiring a silence through the proxy without a user is forbidden", http.MethodDelete, SilencesPath + "/any", ``, withoutUser(), http.StatusForbidden, "needs the user"},
		{"a fix through the proxy without a user is forbidden", http.MethodPost, IncidentsPath + "/" + r.checkout + FixSuffix, `{}`, withoutUser(), http.StatusForbidden, "needs the user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := r.do(t, tc.method, tc.path, tc.body, tc.header)
			require.Equal(t, tc.want, code, string(body))
			var e Error
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error, tc.errPart)
			require.Nil(t, r.incident(t, r.checkout).Ack, "nothing is acknowledged")
		})
	}
	t.Run("a proxied read without a user still sees its application", func(t *testing.T) {
		code, body := r.do(t, http.MethodGet, IncidentsPath+"?state=all", ``, withoutUser())
		require.Equal(t, http.StatusOK, code, string(body))
		require.Equal(t, []string{"shop/migrate:firing"}, ids(t, body))
	})
}

// incident reads incident id with the API token.
func (r *onCallRig) incident(t *testing.T, id string) Incident {
	t.Helper()
	code, body := r.do(t, http.MethodGet, IncidentsPath+"/"+id, ``, bearer(apiToken))
	require.Equal(t, http.StatusOK, code, string(body))
	var inc Incident
	require.NoError(t, json.Unmarshal(body, &inc))
	return inc
}

func TestGroupsFromTheProxyCountOnlyWhenThePolicyTrustsThem(t *testing.T) {
	const groupsOnly = `
rules:
  argocd/hook-finalizer-stuck: {fixBy: ["group:sre"]}
`
	t.Run("without trustProxyGroups a group entry lets nobody acknowledge", func(t *testing.T) {
		r := newOnCallRig(t, groupsOnly)
		code, body := r.do(t, http.MethodPost, IncidentsPath+"/"+r.checkout+AckSuffix, `{}`, asSRE("bob", "sre"))
		require.Equal(t, http.StatusForbidden, code, string(body))
		require.Contains(t, string(body), "policy: argocd user bob via argocd-extension may not acknowledge")
		require.Nil(t, r.incident(t, r.checkout).Ack)
	})
	t.Run("with trustProxyGroups the group entry lets bob", func(t *testing.T) {
		r := newOnCallRig(t, groupsOnly+"trustProxyGroups: true\n")
		code, body := r.do(t, http.MethodPost, IncidentsPath+"/"+r.checkout+AckSuffix, `{}`, asSRE("bob", "sre"))
		require.Equal(t, http.StatusOK, code, string(body))
		require.Equal(t, "argocd user bob", r.incident(t, r.checkout).Ack.By)
	})
}

func TestANamedAPITokenIsOnePerson(t *testing.T) {
	const (
		alice = "alice-0123456789abcdef0123456789abcdef"
		bob   = "bob-0123456789abcdef0123456789abcdef"
	)
	r := newOnCallRigWithTokens(t, `ackBy: ["token:alice"]`+"\nsilenceBy: [\"token\"]", "alice:"+alice+"\n\n# on call\nbob: "+bob+"\n")
	ack := IncidentsPath + "/" + r.checkout + AckSuffix
	t.Run("bob's token is not in ackBy", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, ack, `{}`, bearer(bob))
		require.Equal(t, http.StatusForbidden, code, string(body))
		require.Contains(t, string(body), "policy: token:bob via api-token may not acknowledge")
	})
	t.Run("alice's token acknowledges as token:alice", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, ack, `{}`, bearer(alice))
		require.Equal(t, http.StatusOK, code, string(body))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Equal(t, &Ack{By: "token:alice", At: r.clock.Now()}, inc.Ack)
	})
	t.Run("a silence records bob by his token's name", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "billing"}], "duration": "1h", "comment": "x"}`, bearer(bob))
		require.Equal(t, http.StatusCreated, code, string(body))
		var s Silence
		require.NoError(t, json.Unmarshal(body, &s))
		require.Equal(t, "token:bob", s.CreatedBy)
	})
	t.Run("the file's lines are not tokens themselves", func(t *testing.T) {
		code, _ := r.do(t, http.MethodGet, IncidentsPath, ``, bearer("alice:"+alice))
		require.Equal(t, http.StatusUnauthorized, code)
	})
}

func TestTokensAreCheckedWhenTheAPIStarts(t *testing.T) {
	long := strings.Repeat("a", MinTokenLength)
	for _, tc := range []struct {
		name         string
		token, proxy string
		err          string
	}{
		{"a short API token", "short-token", "", "API token file: the token is 11 characters, want at least 32: write a random one with openssl rand -hex 32"},
		{"a short named token, named in the error", "alice:" + long + "\nbob:short", "", `API token file: the token of "bob" (line 2) is 5 characters, want at least 32: write a random one with openssl rand -hex 32`},
		{"a short proxy token", long, "short", "proxy token file: the proxy token is 5 characters, want at least 32: write a random one with openssl rand -hex 32"},
		{"a proxy token that is an API token", "alice:" + long, long, `the proxy token is the API token of "alice": give argocd-server its own token (openssl rand -hex 32), or every holder of the API token could pose as any Argo CD user`},
		{"several tokens without names", long + "\n" + strings.Repeat("b", MinTokenLength), "", "API token file: token line 1 has no name: with several tokens write each as <name>:<token>"},
		{"a name twice", "alice:" + long + "\nalice:" + strings.Repeat("b", MinTokenLength), "", `API token file: token line 2: the name "alice" is also on line 1: give each person one line`},
		{"one token for two names", "alice:" + long + "\nbob:" + long, "", `API token file: token line 2: "bob" has the same token as "alice": give each person their own`},
		{"a name with a space", "al ice:" + long, "", "API token file: token line 1: the name before the colon is not a token name (letters, digits, '.', '_', '@', '-', at most 64)"},
		{"a proxy token with a name", long, "argocd:" + long, "proxy token file: the proxy token file holds one token, without a name or other lines (openssl rand -hex 32)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Handlers(Options{Incidents: fixtureIncidents, Token: []byte(tc.token), ProxyToken: []byte(tc.proxy)})
			require.EqualError(t, err, tc.err)
			require.NotContains(t, err.Error(), long, "the error never holds a token")
		})
	}
}

func TestUnauthorizedRequestsAreRateLimitedPerClient(t *testing.T) {
	clock := testclock.New()
	hs, err := Handlers(Options{Incidents: fixtureIncidents, Token: []byte(apiToken), now: clock.Now})
	require.NoError(t, err)
	h := hs[IncidentsPath]
	do := func(token, addr string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, IncidentsPath, nil)
		require.NoError(t, err)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	for i := range maxUnauthorizedPerMinute {
		require.Equal(t, http.StatusUnauthorized, do("guess", "10.0.0.1").StatusCode, "guess %d", i+1)
	}
	res := do("guess", "10.0.0.1")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
	require.Equal(t, strconv.Itoa(60/maxUnauthorizedPerMinute), res.Header.Get("Retry-After"))
	require.Equal(t, http.StatusTooManyRequests, do(apiToken, "10.0.0.1").StatusCode, "the token is not compared while the address waits")
	require.Equal(t, http.StatusOK, do(apiToken, "10.0.0.2").StatusCode, "another address is not slowed")
	clock.Advance(time.Minute / maxUnauthorizedPerMinute)
	require.Equal(t, http.StatusOK, do(apiToken, "10.0.0.1").StatusCode, "after the wait a valid token passes")
	require.Equal(t, http.StatusUnauthorized, do("guess", "10.0.0.1").StatusCode, "one more guess")
	require.Equal(t, http.StatusTooManyRequests, do("guess", "10.0.0.1").StatusCode)
	for range 2 * maxUnauthorizedPerMinute {
		require.Equal(t, http.StatusOK, do(apiToken, "10.0.0.3").StatusCode, "valid requests are never limited")
	}
}

func TestARotatedTokenFileIsReadAgainAndAnInvalidOneKeepsTheLastGoodTokens(t *testing.T) {
	one, two := strings.Repeat("1", MinTokenLength), strings.Repeat("2", MinTokenLength)
	content := "alice:" + one
	var logs strings.Builder
	hs, err := Handlers(Options{Incidents: fixtureIncidents, TokenSource: func() []byte { return []byte(content) },
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	code := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, IncidentsPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		hs[IncidentsPath].ServeHTTP(w, req)
		return w.Code
	}
	require.Equal(t, http.StatusOK, code(one))
	content = "alice:" + one + "\nbob:" + two
	require.Equal(t, http.StatusOK, code(two), "a new line takes effect at the next request")
	content = "alice:" + one + "\nbob:short"
	require.Equal(t, http.StatusOK, code(two), "an invalid file keeps the last good tokens")
	require.Equal(t, 1, strings.Count(logs.String(), "the changed token file is invalid"), logs.String())
	require.Contains(t, logs.String(), `the token of \"bob\" (line 2) is 5 characters`)
	require.NotContains(t, logs.String(), one, "no token is logged")
	content = "alice:" + one
	require.Equal(t, http.StatusUnauthorized, code(two), "bob's line removed")
}
