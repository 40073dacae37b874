package ui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// rolloutIncident is an argocd/rollingsync-stalled incident about ApplicationSet argocd/storefront whose step is held
// by storefront-us (project shop); storefront-ap only waits in a later step and is not named.
func rolloutIncident() incident.Incident {
	f := syncmedic.Finding{
		Rule: syncmedic.RuleRollingSyncStalled, Severity: syncmedic.SeverityWarning,
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet",
			Namespace: "argocd", Name: "storefront", Project: "shop"},
		Summary: "RollingSync of ApplicationSet argocd/storefront is held at step 2 of 3 for 1h20m: storefront-us is Degraded/OutOfSync",
		Related: []syncmedic.ObjectRef{{Tool: syncmedic.ToolArgoCD, Group: "argoproj.io", Version: "v1alpha1", Kind: "Application",
			Namespace: "argocd", Name: "storefront-us", App: "storefront-us", AppNamespace: "argocd", Project: "shop"}},
	}.WithFingerprint()
	return incident.Incident{ID: f.Fingerprint + "-1773144000", Fingerprint: f.Fingerprint, State: incident.StateFiring, Finding: f,
		OpenedAt: t0, UpdatedAt: t0.Add(time.Minute)}
}

// TestARolloutIsShownToTheApplicationThatHoldsIt: the incident API shows an ApplicationSet's stalled rollout to an
// Argo CD proxy request of the Application that holds the step (the extension's application view), and to ?app= of
// it, with the application named in relatedApps; not to another application of the same ApplicationSet, nor to the
// holder's name in another namespace or project.
func TestARolloutIsShownToTheApplicationThatHoldsIt(t *testing.T) {
	incs := append(fixtureIncidents(), rolloutIncident())
	hs, err := Handlers(Options{Incidents: func() []incident.Incident { return incs }, Token: []byte(apiToken), ProxyToken: []byte(proxyToken)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for p, h := range hs {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rollout := "argocd/storefront:firing"
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		want   []string
	}{
		{"the application holding the step sees the rollout", "?state=all", viaArgoCD("argocd:storefront-us", "shop"), []string{rollout}},
		{"an application of the same ApplicationSet that only waits does not", "?state=all", viaArgoCD("argocd:storefront-ap", "shop"), []string{}},
		{"the holder's name in another namespace does not", "?state=all", viaArgoCD("team-a:storefront-us", "shop"), []string{}},
		{"the holder's name in another project does not", "?state=all", viaArgoCD("argocd:storefront-us", "finance"), []string{}},
		{"another application sees only its own", "?state=all", viaArgoCD("argocd:checkout", "payments"), []string{"shop/migrate:firing", "shop/seed:firing"}},
		{"?app= of the holder selects the rollout", "?app=storefront-us", bearer(apiToken), []string{rollout}},
		{"?app= of the holder by namespace/name selects the rollout", "?app=argocd/storefront-us", bearer(apiToken), []string{rollout}},
		{"?app= of the waiting application does not", "?app=storefront-ap", bearer(apiToken), []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := get(t, srv, http.MethodGet, IncidentsPath+tc.query, tc.header)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			require.Equal(t, tc.want, ids(t, body))
		})
	}
	id := rolloutIncident().ID
	t.Run("the holder gets the incident by its ID, with itself in relatedApps", func(t *testing.T) {
		res, body := get(t, srv, http.MethodGet, IncidentsPath+"/"+id, viaArgoCD("argocd:storefront-us", "shop"))
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		var inc Incident
		require.NoError(t, json.Unmarshal(body, &inc))
		require.Equal(t, []App{{Name: "storefront-us", Namespace: "argocd", Project: "shop"}}, inc.RelatedApps)
		require.Nil(t, inc.App, "the ApplicationSet itself is not an Application's object")
	})
	t.Run("the waiting application does not", func(t *testing.T) {
		res, body := get(t, srv, http.MethodGet, IncidentsPath+"/"+id, viaArgoCD("argocd:storefront-ap", "shop"))
		require.Equal(t, http.StatusNotFound, res.StatusCode, string(body))
	})
}
