package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

// recordingRemedier counts real and dry-run calls (the HTTP layer is what these tests prove; the remedies
// themselves are proven against the real Argo CD and Flux in their packages).
type recordingRemedier struct {
	mu        sync.Mutex
	real, dry int
}

func (r *recordingRemedier) Remediate(_ context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dryRun {
		r.dry++
		return syncmedic.Outcome{Action: f.Remedy.Action, DryRun: true, Steps: []string{"PatchResource batch/Job " + f.Object.Namespace + "/" + f.Object.Name + ": test+remove /metadata/finalizers/0 (dry-run)"}}, nil
	}
	r.real++
	return syncmedic.Outcome{Action: f.Remedy.Action, Changed: true, Steps: []string{"PatchResource batch/Job " + f.Object.Namespace + "/" + f.Object.Name + ": removed argocd.argoproj.io/hook-finalizer"}}, nil
}

func (r *recordingRemedier) realCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.real
}

const fixPolicy = `
trustProxyGroups: true
defaults:
  rateLimit: {max: 1, window: 1h, backoff: 1m, maxBackoff: 1h}
rules:
  argocd/hook-finalizer-stuck: {mode: notify, fixBy: ["group:sre", "token"]}
`

type fixRig struct {
	srv *httptest.Server
	tr  *incident.Tracker
	rem *recordingRemedier
	// checkout and billing are the IDs of the incidents of two Argo CD applications.
	checkout, billing string
}

// newFixRig serves the API over a real tracker with two open hook incidents (apps checkout and billing).
func newFixRig(t testing.TB) *fixRig {
	t.Helper()
	p, err := policy.LoadPolicy([]byte(fixPolicy))
	require.NoError(t, err)
	r := &fixRig{rem: &recordingRemedier{}}
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: r.rem}, Identity: "syncmedic-0"})
	r.tr, err = incident.NewTracker(context.Background(), incident.TrackerOptions{Policy: func() *policy.Policy { return p }, Remediation: stage})
	require.NoError(t, err)
	incs := fixtureIncidents()
	checkout, billing := incs[0].Finding, incs[3].Finding
	r.tr.Observe(context.Background(), "argocd/checkout", []syncmedic.Finding{checkout})
	r.tr.Observe(context.Background(), "argocd/billing", []syncmedic.Finding{billing})
	for _, inc := range r.tr.Incidents() {
		switch inc.Finding.Object.App {
		case "checkout":
			r.checkout = inc.ID
		case "billing":
			r.billing = inc.ID
		}
	}
	fixer := remedy.NewFixer(stage, r.tr)
	hs, err := Handlers(Options{Policy: func() *policy.Policy { return p }, Incidents: r.tr.Incidents, Token: []byte(apiToken), ProxyToken: []byte(proxyToken), Fix: fixer.Fix, MayFix: fixer.MayFix, Changes: r.tr.Changes})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for p, h := range hs {
		mux.Handle(p, h)
	}
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fixRig) post(t testing.TB, id, body string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL+IncidentsPath+"/"+id+FixSuffix, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := r.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(res.Body).WriteTo(&b)
	require.NoError(t, err)
	return res, []byte(b.String())
}

// asSRE is a proxy extension request of an Argo CD user in group sre, looking at checkout.
func asSRE(user string, groups string) http.Header {
	h := viaArgoCD("argocd:checkout", "payments")
	h.Set("Argocd-Username", user)
	h.Set("Argocd-User-Groups", groups)
	return h
}

func TestAFixIsPlannedThenConfirmedThroughTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		who    string
	}{
		{"an Argo CD user in a fixBy group fixes through the proxy extension", asSRE("bob", "dev,sre"), "argocd user bob (groups dev, sre) via argocd-extension"},
		{"the API token holder fixes directly", bearer(apiToken), "the API token holder via api-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFixRig(t)
			res, body := r.post(t, r.checkout, `{}`, tc.header)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			var plan Fix
			require.NoError(t, json.Unmarshal(body, &plan))
			require.Equal(t, "FixPlan", plan.Kind)
			require.True(t, plan.DryRun)
			require.NotEmpty(t, plan.Confirm)
			require.Equal(t, tc.who, plan.RequestedBy)
			require.Equal(t, []string{"PatchResource batch/Job shop/migrate: test+remove /metadata/finalizers/0 (dry-run)"}, plan.Steps)
			require.Zero(t, r.rem.realCalls(), "the plan changes nothing")

			res, body = r.post(t, r.checkout, `{"confirm": "`+plan.Confirm+`", "comment": "unknown fields are tolerated"}`, tc.header)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			var done Fix
			require.NoError(t, json.Unmarshal(body, &done))
			require.Equal(t, "FixResult", done.Kind)
			require.Equal(t, incident.ResultSucceeded, done.Result)
			require.True(t, done.Changed)
			require.Equal(t, 1, r.rem.realCalls())

			_, body = get(t, r.srv, http.MethodGet, IncidentsPath+"/"+r.checkout, bearer(apiToken))
			var inc Incident
			require.NoError(t, json.Unmarshal(body, &inc))
			last := inc.Attempts[len(inc.Attempts)-1]
			require.Equal(t, tc.who, last.RequestedBy, "the audit trail names who asked")
			require.Equal(t, "succeeded", last.Result)
		})
	}
}

func TestAFixRequestIsRefusedWithAClearError(t *testing.T) {
	r := newFixRig(t)
	big := `{"confirm": "` + strings.Repeat("x", maxFixBody) + `"}`
	for _, tc := range []struct {
		name        string
		id          func() string
		body        string
		contentType string
		header      http.Header
		want        int
		errPart     string
	}{
		{"a user in no fixBy group is forbidden", func() string { return r.checkout }, `{}`, "", asSRE("carol", "dev"), http.StatusForbidden, "not in fixBy"},
		{"another application's incident is not found through the proxy", func() string { return r.billing }, `{}`, "", asSRE("bob", "sre"), http.StatusNotFound, "no incident"},
		{"malformed JSON is a bad request", func() string { return r.checkout }, `{"confirm": `, "", bearer(apiToken), http.StatusBadRequest, "not valid JSON"},
		{"a form post is refused for its media type", func() string { return r.checkout }, `confirm=x`, "application/x-www-form-urlencoded", bearer(apiToken), http.StatusUnsupportedMediaType, "application/json"},
		{"an oversized body is refused", func() string { return r.checkout }, big, "", bearer(apiToken), http.StatusRequestEntityTooLarge, "larger than"},
		{"a confirm that matches no plan is a conflict carrying the plan", func() string { return r.checkout }, `{"confirm": "sha256:old"}`, "", bearer(apiToken), http.StatusConflict, "plan changed"},
		{"an unknown incident is not found", func() string { return "nope" }, `{}`, "", bearer(apiToken), http.StatusNotFound, "no incident nope"},
		{"no token is unauthorized", func() string { return r.checkout }, `{}`, "", http.Header{}, http.StatusUnauthorized, "bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header.Clone()
			if tc.contentType != "" {
				h.Set("Content-Type", tc.contentType)
			}
			res, body := r.post(t, tc.id(), tc.body, h)
			require.Equal(t, tc.want, res.StatusCode, string(body))
			var ref FixRefusal
			require.NoError(t, json.Unmarshal(body, &ref))
			require.Contains(t, ref.Error, tc.errPart)
			if tc.want == http.StatusConflict {
				require.NotNil(t, ref.Plan)
				require.NotEmpty(t, ref.Plan.Confirm)
			}
			require.Zero(t, r.rem.realCalls(), "nothing is applied")
		})
	}
	t.Run("the rate limit answers 429 with Retry-After", func(t *testing.T) {
		r := newFixRig(t)
		for i := range 2 {
			_, body := r.post(t, r.checkout, `{}`, bearer(apiToken))
			var plan Fix
			require.NoError(t, json.Unmarshal(body, &plan))
			res, body := r.post(t, r.checkout, `{"confirm": "`+plan.Confirm+`"}`, bearer(apiToken))
			if i == 0 {
				require.Equal(t, http.StatusOK, res.StatusCode, string(body))
				continue
			}
			require.Equal(t, http.StatusTooManyRequests, res.StatusCode, string(body))
			require.NotEmpty(t, res.Header.Get("Retry-After"))
		}
	})
}

func TestWatchStreamsTheIncidentsAgainAfterEveryChange(t *testing.T) {
	r := newFixRig(t)
	req, err := http.NewRequest(http.MethodGet, r.srv.URL+IncidentsPath+"?watch=true&app=checkout", nil)
	require.NoError(t, err)
	req.Header = bearer(apiToken)
	res, err := r.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	events := make(chan IncidentList, 4)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var l IncidentList
				if json.Unmarshal([]byte(data), &l) == nil {
					events <- l
				}
			}
		}
		close(events)
	}()
	next := func() IncidentList {
		t.Helper()
		select {
		case l, ok := <-events:
			require.True(t, ok, "the stream ended")
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return IncidentList{}
		}
	}
	first := next()
	require.Len(t, first.Items, 1)
	require.Equal(t, "firing", first.Items[0].State)

	t.Run("a change outside the filter sends nothing, a fix of the watched incident sends the new list", func(t *testing.T) {
		r.tr.Observe(context.Background(), "argocd/billing", nil) // billing's incident moves towards resolution
		_, body := r.post(t, r.checkout, `{}`, bearer(apiToken))
		var plan Fix
		require.NoError(t, json.Unmarshal(body, &plan))
		res, body := r.post(t, r.checkout, `{"confirm": "`+plan.Confirm+`"}`, bearer(apiToken))
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		got := next()
		require.Len(t, got.Items, 1)
		require.Equal(t, r.checkout, got.Items[0].ID)
		require.Equal(t, "remediating", got.Items[0].State)
		require.NotEmpty(t, got.Items[0].Attempts)
	})
}

func TestEachIncidentSaysWhetherTheCallerMayFixIt(t *testing.T) {
	r := newFixRig(t)
	for _, tc := range []struct {
		name    string
		header  http.Header
		allowed bool
		reason  string
	}{
		{"a user in a fixBy group may", asSRE("bob", "sre"), true, ""},
		{"a user in no fixBy group may not, and is told why", asSRE("carol", "dev"), false, "not in fixBy"},
		{"the API token holder may (fixBy lists token)", bearer(apiToken), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := get(t, r.srv, http.MethodGet, IncidentsPath+"?app=checkout", tc.header)
			var list IncidentList
			require.NoError(t, json.Unmarshal(body, &list))
			require.Len(t, list.Items, 1)
			require.NotNil(t, list.Items[0].Fix)
			require.Equal(t, tc.allowed, list.Items[0].Fix.Allowed)
			require.Contains(t, list.Items[0].Fix.Reason, tc.reason)
		})
	}
	t.Run("a read-only API says nothing about fixing", func(t *testing.T) {
		_, body := get(t, newServer(t), http.MethodGet, IncidentsPath, bearer(apiToken))
		require.NotContains(t, string(body), `"fix"`)
	})
}
