package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// browserFixPolicy lets the API token holder (the incident page) and the Argo CD user alice (the extension host
// forwards her name, as argocd-server does) fix a held hook finalizer on demand.
const browserFixPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s, fixBy: ["token", "user:alice"]}
`

// TestFixButtonsInChromium clicks the Fix buttons of the incident page and of the Argo CD extension in headless
// Chromium (driven by chromedriver) against a running serve watching the in-process argocd-server: the plan shows
// first and changes nothing; "Apply this fix" removes the hook finalizer through argocd-server and the page shows
// the result.
func TestFixButtonsInChromium(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"syncmedic"},
		Policy:   []string{"p, role:syncmedic, applications, get, */*, allow", "p, role:syncmedic, applications, update, */*, allow", "g, syncmedic, role:syncmedic"},
	})
	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: leakedHook
	// writes the finished operation and the hook it leaked. The fix itself goes through argocd-server for real.
	pageJob := leakedHook(t, argo, "page-checkout")
	// hand-written state: see leakedHook (second app).
	extJob := leakedHook(t, argo, "ext-checkout")
	serve := startFixServe(t, env, argo, browserFixPolicy, freeAddr(t), testToken("api-token-for-the-browser-fix-test"))
	serve.waitIncidents(t, pageJob.Namespace, pageJob.Namespace+"/"+pageJob.Name)
	serve.waitIncidents(t, extJob.Namespace, extJob.Namespace+"/"+extJob.Name)
	gone := func(job *batchv1.Job) bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{}))
	}

	t.Run("on the incident page the plan comes first, then the fix is applied", func(t *testing.T) {
		b := testenv.NewBrowser(t)
		b.Open(serve.Base + ui.PagePath + "?state=open#token=" + url.QueryEscape(serve.Token))
		b.WaitText("live · updated")
		_, _, body := apiIncidents(serve.Base+ui.IncidentsPath+"?app=page-checkout", http.Header{"Authorization": {"Bearer " + serve.Token}})
		var list ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list.Items, 1, body)
		b.Click(`#incident-` + list.Items[0].ID + ` .fix-plan`)
		b.WaitText("syncmedic will apply argocd/remove-hook-finalizer:")
		b.WaitText("PatchResource")
		require.False(t, gone(pageJob), "the plan changed nothing")
		if *update {
			require.NoError(t, os.WriteFile(filepath.Join(screenshots, "incident-page-fix.png"), b.Screenshot(), 0o644))
		}
		b.Click(`#incident-` + list.Items[0].ID + ` .fix-confirm`)
		b.WaitText("argocd/remove-hook-finalizer: succeeded (changed)")
		require.Eventually(t, func() bool { return gone(pageJob) }, 30*time.Second, 50*time.Millisecond, "the held Job is gone once its finalizer is")
		b.WaitText("requested by the API token holder via api-token")
	})

	t.Run("in the Argo CD extension the plan comes first, then the fix is applied", func(t *testing.T) {
		host := extensionHost(t, &serve.uiServe)
		b := testenv.NewBrowser(t)
		b.Open(host.URL + "/host.html?" + url.Values{"app": {"ext-checkout"}, "ns": {argo.Namespace}, "job": {extJob.Name}, "jobns": {extJob.Namespace}}.Encode())
		b.Click(`#app-tab .syncmedic-fix-plan`)
		b.WaitText("syncmedic will apply argocd/remove-hook-finalizer:")
		require.False(t, gone(extJob), "the plan changed nothing")
		b.Click(`#app-tab .syncmedic-fix-confirm`)
		b.WaitText("argocd/remove-hook-finalizer: succeeded (changed)")
		require.Eventually(t, func() bool { return gone(extJob) }, 30*time.Second, 50*time.Millisecond, "the held Job is gone once its finalizer is")
		require.Contains(t, serve.Logs.String(), `requestedBy="argocd user alice via argocd-extension"`)
		png := b.Screenshot()
		require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
	})
}
