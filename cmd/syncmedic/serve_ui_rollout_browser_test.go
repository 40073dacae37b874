package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/snapshot"
	"github.com/syncmedic/syncmedic/ui"
)

// TestArgoCDExtensionShowsARolloutOnTheApplicationHoldingIt loads the extension, in headless Chromium, for the
// Application that holds examples/stuck-cluster's stalled RollingSync step (storefront-us) and for one that only
// waits in a later step (storefront-ap): the argocd/rollingsync-stalled incident, about the ApplicationSet, shows on
// the holder's status panel and application tab, and not on the other's. The incident is the rule's own finding from
// the example (snapshot scan), served by the incident API the way serve serves it.
func TestArgoCDExtensionShowsARolloutOnTheApplicationHoldingIt(t *testing.T) {
	s, err := snapshot.ReadPaths(filepath.Join("..", "..", "examples", "stuck-cluster"))
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339, judgedAt)
	require.NoError(t, err)
	var incs []incident.Incident
	for _, f := range snapshot.Scan(s.Observe(), at, snapshot.DefaultThresholds()) {
		if f.Rule == syncmedic.RuleRollingSyncStalled {
			incs = append(incs, incident.Incident{ID: f.Fingerprint + "-1", Fingerprint: f.Fingerprint, State: incident.StateFiring,
				Finding: f, OpenedAt: time.Now(), UpdatedAt: time.Now()})
		}
	}
	require.Len(t, incs, 1)
	require.Equal(t, "ApplicationSet/argocd/storefront", incs[0].Finding.Object.Kind+"/"+incs[0].Finding.Object.Namespace+"/"+incs[0].Finding.Object.Name)
	token := testToken("api-" + t.Name())
	hs, err := ui.Handlers(ui.Options{Incidents: func() []incident.Incident { return incs }, Token: []byte(token), ProxyToken: []byte(proxyTokenOf(token))})
	require.NoError(t, err)
	mux := http.NewServeMux()
	for p, h := range hs {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	host := extensionHost(t, &uiServe{Base: srv.URL, Token: token})
	page := func(app string) string {
		return host.URL + "/host.html?" + url.Values{"app": {app}, "ns": {"argocd"}, "project": {"default"}, "job": {"none"}, "jobns": {"storefront"}}.Encode()
	}

	holder := dumpDOM(t, page("storefront-us"))
	t.Run("the holder's application tab shows the rollout, its summary and the holder's evidence", func(t *testing.T) {
		_, tab, ok := strings.Cut(holder, `id="app-tab"`)
		require.True(t, ok)
		for _, want := range []string{"ApplicationSet/argocd/storefront", "is held at step 2 of 3", "app storefront-us health"} {
			require.Contains(t, tab, want)
		}
	})
	t.Run("the holder's status panel names the rollout", func(t *testing.T) {
		rule, ok := syncmedic.LookupRule(syncmedic.RuleRollingSyncStalled)
		require.True(t, ok)
		_, panel, ok := strings.Cut(holder, `class="syncmedic-status"`)
		require.True(t, ok, "no status panel entry")
		panel, _, _ = strings.Cut(panel, `class="panes"`)
		require.Contains(t, panel, rule.Title)
	})
	t.Run("an application that only waits in a later step shows no incident", func(t *testing.T) {
		dom := dumpDOM(t, page("storefront-ap"))
		require.NotContains(t, dom, "ApplicationSet/argocd/storefront")
		require.Contains(t, dom, "syncmedic has no incident here.")
		require.NotContains(t, dom, "syncmedic: HTTP")
	})
	t.Run("the incident page names the application holding the rollout", func(t *testing.T) {
		dom := dumpDOM(t, srv.URL+ui.PagePath+"#token="+url.QueryEscape(token))
		_, meta, ok := strings.Cut(dom, `class="meta">`)
		require.True(t, ok, "no incident shown")
		meta, _, _ = strings.Cut(meta, "</div>")
		require.Regexp(t, `^argocd/rollingsync-stalled · ApplicationSet\.argoproj\.io/argocd/storefront · `+
			`also about Argo CD app argocd/storefront-us \(project default\) · open \d+s$`, meta,
			"the holder, not the application waiting in a later step")
	})
	t.Run("no call failed", func(t *testing.T) {
		require.NotContains(t, holder, "syncmedic: HTTP")
		require.NotContains(t, holder, "unavailable")
	})
}
