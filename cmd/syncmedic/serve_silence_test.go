package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// silencePolicy lets syncmedic remove a held hook finalizer unattended, and the API token holder create silences.
const silencePolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 1s}
silenceBy: ["token"]
`

// TestASilenceFromTheAPIHoldsBackAnnouncementAndRemedyUntilItEnds runs serve against the in-process argocd-server
// with Slack on the test server and an auto policy. A silence created through the API before two hooks leak matches
// one application only: the other application's incident is announced and its finalizer removed unattended (the
// control: serve acts in this setup), while the silenced one is tracked and shown as silenced but neither announced
// nor remedied. When the silence ends, on the tracker's own clock, the still-open incident is announced, and the
// next evaluation remedies it.
func TestASilenceFromTheAPIHoldsBackAnnouncementAndRemedyUntilItEnds(t *testing.T) {
	token := testToken("api-token-for-the-silence-test")
	env, slack, argo, r := startOnCallServe(t, token, writeFile(t, "policy.yaml", silencePolicy), "--argocd-live-resync", "2s")
	s := &uiServe{Base: r.Base, Token: token, Logs: r.Logs}
	require.Eventually(t, func() bool { code, _ := get(s.Base + "/readyz"); return code == http.StatusOK }, 60*time.Second, 50*time.Millisecond, s.Logs.String())
	auth := http.Header{"Authorization": {"Bearer " + token}}

	const silenced, control = "silenced-shop", "control-shop"
	const silenceFor = 40 * time.Second
	var sil ui.Silence
	t.Run("the token holder creates a silence of one application", func(t *testing.T) {
		code, body := postJSON(t, s.Base+ui.SilencesPath, `{"matchers": [{"name": "app", "value": "`+silenced+`"},
			{"name": "rule", "value": "argocd/hook-.*", "isRegex": true}], "duration": "`+silenceFor.String()+`", "comment": "planned migration"}`, auth)
		require.Equal(t, http.StatusCreated, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &sil))
		require.Equal(t, "active", string(sil.State))
	})
	created := time.Now()

	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: the finished
	// operation and the hook it leaked are written as leakedHook says. What this test proves is what serve does
	// with the incident, which is all real.
	quiet := leakedHook(t, argo, silenced)
	// hand-written state: see leakedHook, as above, for the control application.
	loud := leakedHook(t, argo, control)
	require.NotEqual(t, quiet.Namespace, loud.Namespace)

	t.Run("the control application's incident is announced and remedied unattended", func(t *testing.T) {
		require.Eventually(t, func() bool { return len(slack.Roots(loud.Namespace+"/"+loud.Name)) == 1 }, 60*time.Second, 100*time.Millisecond, slack.Summary())
		requireGone(t, env, loud)
	})
	var inc ui.Incident
	t.Run("the silenced incident is tracked and shown as silenced", func(t *testing.T) {
		s.waitIncidents(t, quiet.Namespace, quiet.Namespace+"/"+quiet.Name)
		_, _, body := apiIncidents(s.Base+ui.IncidentsPath+"?namespace="+quiet.Namespace, auth)
		var list ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		require.Len(t, list.Items, 1, body)
		inc = list.Items[0]
		require.Equal(t, "argocd/hook-finalizer-stuck", inc.Rule)
		require.Equal(t, sil.ID, inc.SilencedBy, body)
		require.True(t, inc.Unannounced, body)
	})
	t.Run("while the silence lasts it is neither announced nor remedied", func(t *testing.T) {
		// Several live-state reads (--argocd-live-resync 2s) evaluate it meanwhile; the control was remedied at its first.
		for time.Since(created) < silenceFor-8*time.Second {
			require.Empty(t, slack.Roots(quiet.Namespace+"/"+quiet.Name), slack.Summary())
			cur := &batchv1.Job{}
			require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(quiet), cur))
			require.Contains(t, cur.Finalizers, rules.HookFinalizer, "no automatic remedy while silenced")
			time.Sleep(500 * time.Millisecond)
		}
		require.Contains(t, s.Logs.String(), `silencedBy=`+sil.ID)
		_, metrics := get(s.Base + "/metrics")
		require.Contains(t, metrics, `syncmedic_notifications_suppressed_total{event="opened"} 1`)
		require.Contains(t, metrics, `syncmedic_silences{state="active"} 1`)
		for _, m := range slack.All() {
			require.NotContains(t, m.Text+m.Blocks, quiet.Namespace, "nothing about the silenced incident reached Slack")
		}
	})
	t.Run("when the silence ends the still-open incident is announced, then remedied", func(t *testing.T) {
		require.Eventually(t, func() bool { return len(slack.Roots(quiet.Namespace+"/"+quiet.Name)) == 1 }, 60*time.Second, 100*time.Millisecond, slack.Summary())
		require.GreaterOrEqual(t, time.Since(created), silenceFor, "not before the silence ends")
		requireGone(t, env, quiet)
		// The gauge follows the once-a-second silence check, which can come after the evaluation that announced.
		require.Eventually(t, func() bool {
			_, metrics := get(s.Base + "/metrics")
			return strings.Contains(metrics, `syncmedic_silences{state="expired"} 1`)
		}, 5*time.Second, 100*time.Millisecond, "the silences gauge counts the ended silence")
		require.Len(t, slack.Roots(loud.Namespace+"/"+loud.Name), 1, "the control was announced once")
		require.Len(t, slack.Roots(quiet.Namespace+"/"+quiet.Name), 1, "the silenced incident was announced once")
		require.True(t, strings.Contains(s.Logs.String(), "incident announced: no silence mutes it any more"), s.Logs.String())
	})
}

// requireGone waits until the held Job is gone: its finalizer was removed.
func requireGone(t *testing.T, env *testenv.Env, job *batchv1.Job) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "the held Job %s is gone once its finalizer is", job.Name)
}
