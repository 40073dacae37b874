package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// browserOnCallPolicy lets the API token holder (the incident page) and the Argo CD user alice (the extension host
// forwards her name) create silences, and so acknowledge (ackBy is unset); nobody may fix.
const browserOnCallPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s}
silenceBy: ["token", "user:alice"]
`

// TestAcknowledgeAndSilenceInChromium clicks Acknowledge and fills the Silence… form on the incident page, expires
// the silence from the page's list, and acknowledges from the Argo CD extension, in headless Chromium against a
// running serve watching the in-process argocd-server. The API confirms each step.
func TestAcknowledgeAndSilenceInChromium(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"syncmedic"},
		Policy:   []string{"p, role:syncmedic, applications, get, */*, allow", "g, syncmedic, role:syncmedic"},
	})
	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: leakedHook
	// writes the finished operation and the hook it leaked. Nothing here changes the cluster.
	pageJob := leakedHook(t, argo, "oncall-page")
	// hand-written state: see leakedHook (second app).
	extJob := leakedHook(t, argo, "oncall-ext")
	serve := startFixServe(t, env, argo, browserOnCallPolicy, freeAddr(t), testToken("api-token-for-the-browser-oncall-test"))
	serve.waitIncidents(t, pageJob.Namespace, pageJob.Namespace+"/"+pageJob.Name)
	serve.waitIncidents(t, extJob.Namespace, extJob.Namespace+"/"+extJob.Name)
	auth := http.Header{"Authorization": {"Bearer " + serve.Token}}
	incidentOf := func(app string) ui.Incident {
		_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"?app="+app, auth)
		var list ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list.Items, 1, body)
		return list.Items[0]
	}

	t.Run("on the incident page: acknowledge, silence with the form, then expire the silence", func(t *testing.T) {
		inc := incidentOf("oncall-page")
		b := testenv.NewBrowser(t)
		b.Open(serve.Base + ui.PagePath + "?state=open#token=" + url.QueryEscape(serve.Token))
		b.WaitText("live · updated")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the page when the test failed:\n%s\nserve log:\n%s", b.Source(), serve.Logs.String())
			}
		})
		sel := `#incident-` + inc.ID
		b.Click(sel + ` .ack-button`)
		b.WaitText("Acknowledged by the API token holder")
		require.Equal(t, "the API token holder", incidentOf("oncall-page").Ack.By)

		b.Click(sel + ` .silence-button`)
		b.Type(sel+` .silence-comment`, "planned migration")
		b.Click(sel + ` .silence-create`)
		b.WaitText("Silenced by silence ")
		got := incidentOf("oncall-page")
		require.NotEmpty(t, got.SilencedBy)
		_, _, body := apiIncidents(serve.Base+ui.SilencesPath+"/"+got.SilencedBy, auth)
		var sil ui.Silence
		require.NoError(t, json.Unmarshal([]byte(body), &sil))
		require.Equal(t, "active", string(sil.State))
		require.Equal(t, "planned migration", sil.Comment)
		require.NotNil(t, got.App)
		require.Equal(t, `rule="argocd/hook-finalizer-stuck", namespace="`+pageJob.Namespace+`", kind="Job", app="oncall-page", appNamespace="`+
			got.App.Namespace+`", project="`+got.App.Project+`", name="`+pageJob.Name+`"`, matcherText(sil))
		require.NotEmpty(t, got.App.Namespace)
		require.NotEmpty(t, got.App.Project)
		require.Empty(t, incidentOf("oncall-ext").SilencedBy, "the prefilled matchers are the incident's own")
		b.WaitText("Silences")

		b.Click(`#silence-` + sil.ID + ` .silence-expire`)
		require.Eventually(t, func() bool { return incidentOf("oncall-page").SilencedBy == "" }, 30*time.Second, 100*time.Millisecond)
		cur := &batchv1.Job{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(pageJob), cur))
		require.Contains(t, cur.Finalizers, rules.HookFinalizer, "acknowledging and silencing change nothing in the cluster")
	})

	t.Run("in the Argo CD extension: acknowledge as the Argo CD user", func(t *testing.T) {
		host := extensionHost(t, &serve.uiServe)
		b := testenv.NewBrowser(t)
		b.Open(host.URL + "/host.html?" + url.Values{"app": {"oncall-ext"}, "ns": {argo.Namespace}, "job": {extJob.Name}, "jobns": {extJob.Namespace}}.Encode())
		b.Click(`#app-tab .syncmedic-ack-button`)
		b.WaitText("Acknowledged by argocd user alice")
		require.Equal(t, "argocd user alice", incidentOf("oncall-ext").Ack.By)
	})
}

// matcherText renders a silence's matchers as Alertmanager does.
func matcherText(s ui.Silence) string {
	parts := make([]string, len(s.Matchers))
	for i, m := range s.Matchers {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}
