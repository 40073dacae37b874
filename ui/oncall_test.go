package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testclock"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/silence"
)

const onCallPolicy = `
rules:
  argocd/hook-finalizer-stuck: {fixBy: ["group:sre"]}
trustProxyGroups: true
silenceBy: ["group:oncall", "token"]
silenceAllBy: ["token"]
`

type onCallRig struct {
	srv               *httptest.Server
	tr                *incident.Tracker
	clock             *testclock.Clock
	evs               *recorded
	checkout, billing string
	leading           bool
}

// recorded collects the tracker's published events.
type recorded struct{ kinds []incident.EventKind }

func (r *recorded) Publish(ev incident.Event) { r.kinds = append(r.kinds, ev.Kind) }

func newOnCallRig(t *testing.T, policyYAML string) *onCallRig {
	t.Helper()
	return newOnCallRigWithTokens(t, policyYAML, apiToken)
}

// newOnCallRigWithTokens is newOnCallRig with tokens as the API token file's content.
func newOnCallRigWithTokens(t *testing.T, policyYAML, tokens string) *onCallRig {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(policyYAML))
	require.NoError(t, err)
	r := &onCallRig{clock: testclock.New(), evs: &recorded{}, leading: true}
	r.tr, err = incident.NewTracker(context.Background(), incident.TrackerOptions{Policy: func() *policy.Policy { return p },
		Now: r.clock.Now, Publisher: r.evs, Leader: func() bool { return r.leading }})
	require.NoError(t, err)
	incs := fixtureIncidents()
	r.tr.Observe(context.Background(), "argocd/checkout", []syncmedic.Finding{incs[0].Finding})
	r.tr.Observe(context.Background(), "argocd/billing", []syncmedic.Finding{incs[3].Finding})
	for _, inc := range r.tr.Incidents() {
		switch inc.Finding.Object.App {
		case "checkout":
			r.checkout = inc.ID
		case "billing":
			r.billing = inc.ID
		}
	}
	hs, err := Handlers(Options{Incidents: r.tr.Incidents, Token: []byte(tokens), ProxyToken: []byte(proxyToken), Acknowledge: r.tr.Acknowledge, Silences: r.tr,
		Policy: func() *policy.Policy { return p }})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for p, h := range hs {
		mux.Handle(p, h)
	}
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *onCallRig) do(t *testing.T, method, path, body string, h http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := r.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, b
}

func TestAcknowledgeThroughTheAPI(t *testing.T) {
	r := newOnCallRig(t, onCallPolicy)
	path := IncidentsPath + "/" + r.checkout + AckSuffix

	t.Run("a user in the rule's fixBy acknowledges; the incident shows it", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, path, `{}`, asSRE("bob", "sre"))
		require.Equal(t, http.StatusOK, code, string(body))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Equal(t, &Ack{By: "argocd user bob", At: r.clock.Now()}, inc.Ack)
		require.Equal(t, "acknowledged", inc.Timeline[len(inc.Timeline)-1].Kind)
		require.Equal(t, []incident.EventKind{incident.EventOpened, incident.EventOpened, incident.EventAcknowledged}, r.evs.kinds)
	})
	t.Run("the same person again is idempotent", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, path, ``, asSRE("bob", "sre"))
		require.Equal(t, http.StatusOK, code, string(body))
		require.Len(t, r.evs.kinds, 3)
	})
	t.Run("a silenceBy member takes it over", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, path, `{}`, asSRE("alice", "oncall"))
		require.Equal(t, http.StatusOK, code, string(body))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Equal(t, "argocd user alice", inc.Ack.By)
		require.Equal(t, "argocd user bob", inc.Ack.TakenOverFrom)
	})
	for _, tc := range []struct {
		name    string
		path    string
		method  string
		body    string
		header  http.Header
		want    int
		errPart string
	}{
		{"a user in neither fixBy nor silenceBy is forbidden", path, http.MethodPost, `{}`, asSRE("carol", "dev"), http.StatusForbidden, "may not acknowledge"},
		{"another application's incident is not found through the proxy", IncidentsPath + "/" + r.billing + AckSuffix, http.MethodPost, `{}`, asSRE("bob", "sre"), http.StatusNotFound, "no incident"},
		{"GET is not allowed", path, http.MethodGet, ``, bearer(apiToken), http.StatusMethodNotAllowed, "POST"},
		{"an oversized body is refused", path, http.MethodPost, `{"x":"` + strings.Repeat("x", maxAckBody) + `"}`, bearer(apiToken), http.StatusRequestEntityTooLarge, "larger than"},
		{"an unknown incident is not found", IncidentsPath + "/nope" + AckSuffix, http.MethodPost, `{}`, bearer(apiToken), http.StatusNotFound, "no incident nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := r.do(t, tc.method, tc.path, tc.body, tc.header)
			require.Equal(t, tc.want, code, string(body))
			var e Error
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error, tc.errPart)
		})
	}
	t.Run("a follower answers 503 with Retry-After", func(t *testing.T) {
		r.leading = false
		defer func() { r.leading = true }()
		r.tr.Observe(context.Background(), "argocd/checkout", nil) // a follower forgets it was synced
		code, body := r.do(t, http.MethodPost, path, `{}`, bearer(apiToken))
		require.Equal(t, http.StatusServiceUnavailable, code, string(body))
	})
}

func TestSilencesThroughTheAPI(t *testing.T) {
	r := newOnCallRig(t, onCallPolicy)
	var created Silence
	t.Run("the token holder creates a silence; it matches the incident at once", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "check.*", "isRegex": true},
			{"name": "rule", "value": "argocd/hook-finalizer-stuck"}], "duration": "2h", "comment": "maintenance", "severity": "unknown fields are tolerated"}`, bearer(apiToken))
		require.Equal(t, http.StatusCreated, code, string(body))
		require.NoError(t, json.Unmarshal(body, &created))
		require.NotEmpty(t, created.ID)
		require.Equal(t, silence.StateActive, created.State)
		require.Equal(t, "the API token holder", created.CreatedBy)
		require.Equal(t, r.clock.Now().Add(2*time.Hour), created.EndsAt)

		_, body = r.do(t, http.MethodGet, IncidentsPath+"/"+r.checkout, ``, bearer(apiToken))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Equal(t, created.ID, inc.SilencedBy)
		_, body = r.do(t, http.MethodGet, IncidentsPath+"/"+r.billing, ``, bearer(apiToken))
		inc = Incident{}
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Empty(t, inc.SilencedBy, "the anchored regex does not match billing")
	})
	t.Run("it is listed", func(t *testing.T) {
		code, body := r.do(t, http.MethodGet, SilencesPath, ``, bearer(apiToken))
		require.Equal(t, http.StatusOK, code)
		var l SilenceList
		require.NoError(t, json.Unmarshal(body, &l))
		require.Len(t, l.Items, 1)
		require.Equal(t, created.ID, l.Items[0].ID)
	})
	t.Run("the extension sees only silences of its application", func(t *testing.T) {
		h := viaArgoCD("argocd:billing", "finance")
		_, body := r.do(t, http.MethodGet, SilencesPath, ``, h)
		var l SilenceList
		require.NoError(t, json.Unmarshal(body, &l))
		require.Empty(t, l.Items)
	})
	t.Run("DELETE expires it", func(t *testing.T) {
		code, body := r.do(t, http.MethodDelete, SilencesPath+"/"+created.ID, ``, bearer(apiToken))
		require.Equal(t, http.StatusOK, code, string(body))
		var s Silence
		require.NoError(t, json.Unmarshal(body, &s))
		require.Equal(t, silence.StateExpired, s.State)
		_, body = r.do(t, http.MethodGet, IncidentsPath+"/"+r.checkout, ``, bearer(apiToken))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Empty(t, inc.SilencedBy)
	})
	for _, tc := range []struct {
		name    string
		method  string
		path    string
		body    string
		header  http.Header
		want    int
		errPart string
	}{
		{"no matcher is a bad request", http.MethodPost, SilencesPath, `{"duration": "1h", "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, "at least one"},
		{"an unknown matcher name is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "pod", "value": "x"}], "duration": "1h", "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, `matcher name "pod"`},
		{"a broken regex is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "(", "isRegex": true}], "duration": "1h", "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, "not a regular expression"},
		{"no end is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "x"}], "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, "endsAt: required"},
		{"a bad duration is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "x"}], "duration": "soon", "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, `duration "soon"`},
		{"no comment is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "x"}], "duration": "1h"}`, bearer(apiToken), http.StatusBadRequest, "comment: required"},
		{"malformed JSON is a bad request", http.MethodPost, SilencesPath, `{"matchers": `, bearer(apiToken), http.StatusBadRequest, "not valid JSON"},
		{"an oversized body is refused", http.MethodPost, SilencesPath, `{"comment": "` + strings.Repeat("x", maxSilenceBody) + `"}`, bearer(apiToken), http.StatusRequestEntityTooLarge, "larger than"},
		{"a user outside silenceBy is forbidden", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "1h", "comment": "x"}`, asSRE("bob", "sre"), http.StatusForbidden, "silenceBy"},
		{"the extension may silence only its application", http.MethodPost, SilencesPath, `{"matchers": [{"name": "rule", "value": "x"}], "duration": "1h", "comment": "x"}`, asSRE("alice", "oncall"), http.StatusForbidden,
			`from the Argo CD extension a silence must match its Application exactly: add the matchers app="checkout", appNamespace="argocd" and project="payments" (not regular expressions)`},
		{"the extension may not silence its application by name alone", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "1h", "comment": "x"}`, asSRE("alice", "oncall"), http.StatusForbidden, `appNamespace="argocd"`},
		{"the extension may not pin its project by regex", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}, {"name": "appNamespace", "value": "argocd"}, {"name": "project", "value": "pay.*", "isRegex": true}], "duration": "1h", "comment": "x"}`, asSRE("alice", "oncall"), http.StatusForbidden, `project="payments"`},
		{"a silence longer than a week is a bad request", http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "x"}], "duration": "8d", "comment": "x"}`, bearer(apiToken), http.StatusBadRequest, "the silence lasts 8d, at most 7d (serve --silence-max-duration)"},
		{"expiring an unknown silence is not found", http.MethodDelete, SilencesPath + "/nope", ``, bearer(apiToken), http.StatusNotFound, "no silence nope"},
		{"PUT is not allowed", http.MethodPut, SilencesPath, `{}`, bearer(apiToken), http.StatusMethodNotAllowed, "POST"},
		{"no token is unauthorized", http.MethodGet, SilencesPath, ``, http.Header{}, http.StatusUnauthorized, "bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := r.do(t, tc.method, tc.path, tc.body, tc.header)
			require.Equal(t, tc.want, code, string(body))
			var e Error
			require.NoError(t, json.Unmarshal(body, &e))
			require.Contains(t, e.Error, tc.errPart)
		})
	}
	t.Run("the extension's user in silenceBy silences its application", func(t *testing.T) {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}, {"name": "appNamespace", "value": "argocd"},
			{"name": "project", "value": "payments"}], "duration": "30m", "comment": "deploying"}`, asSRE("alice", "oncall"))
		require.Equal(t, http.StatusCreated, code, string(body))
		_, body = r.do(t, http.MethodGet, IncidentsPath+"/"+r.checkout, ``, bearer(apiToken))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.NotEmpty(t, inc.SilencedBy, "the pinned silence mutes the application's incident")
	})
	t.Run("with an empty silenceBy nobody may silence", func(t *testing.T) {
		r := newOnCallRig(t, "")
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "30m", "comment": "x"}`, bearer(apiToken))
		require.Equal(t, http.StatusForbidden, code, string(body))
		code, body = r.do(t, http.MethodPost, IncidentsPath+"/"+r.checkout+AckSuffix, `{}`, bearer(apiToken))
		require.Equal(t, http.StatusForbidden, code, string(body))
	})
}

// A request through the Argo CD extension lists, reads and expires only the silences pinned to its Application
// (name, namespace and project exactly): not another project's Application of the same name, nor a silence by name
// alone, which mutes every Application and HelmRelease of that name.
func TestTheExtensionSeesOnlySilencesPinnedToItsApplication(t *testing.T) {
	r := newOnCallRig(t, onCallPolicy)
	create := func(matchers string) string {
		t.Helper()
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [`+matchers+`], "duration": "1h", "comment": "x"}`, bearer(apiToken))
		require.Equal(t, http.StatusCreated, code, string(body))
		var s Silence
		require.NoError(t, json.Unmarshal(body, &s))
		return s.ID
	}
	own := create(`{"name": "app", "value": "checkout"}, {"name": "appNamespace", "value": "argocd"}, {"name": "project", "value": "payments"}`)
	teamB := create(`{"name": "app", "value": "checkout"}, {"name": "appNamespace", "value": "argocd"}, {"name": "project", "value": "team-b"}`)
	byName := create(`{"name": "app", "value": "checkout"}`)
	ext := asSRE("alice", "oncall")

	code, body := r.do(t, http.MethodGet, SilencesPath, ``, ext)
	require.Equal(t, http.StatusOK, code)
	var l SilenceList
	require.NoError(t, json.Unmarshal(body, &l))
	require.Len(t, l.Items, 1)
	require.Equal(t, own, l.Items[0].ID)
	_, body = r.do(t, http.MethodGet, SilencesPath, ``, bearer(apiToken))
	l = SilenceList{}
	require.NoError(t, json.Unmarshal(body, &l))
	require.Len(t, l.Items, 3, "the token holder lists them all")

	for _, id := range []string{teamB, byName} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			code, body := r.do(t, method, SilencesPath+"/"+id, ``, ext)
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", method, id, body)
			var e Error
			require.NoError(t, json.Unmarshal(body, &e))
			require.Equal(t, "silence "+id+` is not pinned to the Application argocd/checkout of project payments: from the Argo CD extension `+
				`only silences with the matchers app="checkout", appNamespace="argocd" and project="payments" are shown and expired`, e.Error)
			got, ok := r.tr.GetSilence(id)
			require.True(t, ok)
			require.Equal(t, silence.StateActive, got.State(r.clock.Now()), "%s %s left it active", method, id)
		}
	}
	code, body = r.do(t, http.MethodDelete, SilencesPath+"/"+own, ``, ext)
	require.Equal(t, http.StatusOK, code, string(body))
	got, _ := r.tr.GetSilence(own)
	require.Equal(t, silence.StateExpired, got.State(r.clock.Now()))
}

// A silence about no one application or object (no exact app or name matcher) needs silenceAllBy; silenceBy alone
// may silence an application or an object.
func TestASilenceOfEverythingNeedsSilenceAllBy(t *testing.T) {
	r := newOnCallRig(t, "silenceBy: [\"token\", \"group:oncall\"]\nsilenceAllBy: [\"group:sre-leads\"]\n")
	for _, matchers := range []string{
		`{"name": "rule", "value": ".*", "isRegex": true}`,
		`{"name": "app", "value": ".*", "isRegex": true}, {"name": "name", "value": ".+", "isRegex": true}`,
		`{"name": "namespace", "value": "shop"}`,
		`{"name": "app", "value": ""}`,
	} {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [`+matchers+`], "duration": "1h", "comment": "x"}`, bearer(apiToken))
		require.Equal(t, http.StatusForbidden, code, matchers)
		var e Error
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, "policy: this silence is about no one application or object (it has no exact app or name matcher) and could mute "+
			"every team's incidents; the API token holder via api-token may not create such silences: add an exact app or name matcher, "+
			"or list who may in silenceAllBy", e.Error, matchers)
	}
	require.Empty(t, r.tr.Silences())
	for _, matchers := range []string{`{"name": "app", "value": "checkout"}`, `{"name": "name", "value": "migrate"}, {"name": "rule", "value": ".*", "isRegex": true}`} {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [`+matchers+`], "duration": "1h", "comment": "x"}`, bearer(apiToken))
		require.Equal(t, http.StatusCreated, code, "%s: %s", matchers, body)
	}
	// A request through Argo CD's proxy extension is confined to its application, so only a direct caller can be in
	// silenceAllBy: here one person's named API token.
	const leadToken, oncallToken = "lead-token-for-tests-0123456789abcdef", "oncall-token-for-tests-0123456789abcdef"
	r = newOnCallRigWithTokens(t, "silenceBy: [\"token\"]\nsilenceAllBy: [\"token:lead\"]\n", "lead:"+leadToken+"\noncall:"+oncallToken+"\n")
	all := `{"matchers": [{"name": "rule", "value": ".*", "isRegex": true}], "duration": "1h", "comment": "x"}`
	code, body := r.do(t, http.MethodPost, SilencesPath, all, bearer(oncallToken))
	require.Equal(t, http.StatusForbidden, code, string(body))
	code, body = r.do(t, http.MethodPost, SilencesPath, all, bearer(leadToken))
	require.Equal(t, http.StatusCreated, code, string(body))
}

// One caller's pending and active silences are bounded (silence.MaxPerCreator): the next is refused with 429.
func TestSilencesPerCallerAreBoundedThroughTheAPI(t *testing.T) {
	r := newOnCallRig(t, onCallPolicy)
	for i := range silence.MaxPerCreator {
		code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "1h", "comment": "x"}`, bearer(apiToken))
		require.Equal(t, http.StatusCreated, code, "silence %d: %s", i, body)
	}
	code, body := r.do(t, http.MethodPost, SilencesPath, `{"matchers": [{"name": "app", "value": "checkout"}], "duration": "1h", "comment": "x"}`, bearer(apiToken))
	require.Equal(t, http.StatusTooManyRequests, code)
	var e Error
	require.NoError(t, json.Unmarshal(body, &e))
	require.Equal(t, "limit reached: the API token holder has 50 pending or active silences, at most 50: expire some first", e.Error)
}
