package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/ui"
)

// slackOnCallPolicy lets the Slack member U0ALICE fix a held hook finalizer on demand and create silences (and so,
// ackBy being unset, acknowledge); nothing is done unattended.
const slackOnCallPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s, fixBy: ["slack:U0ALICE"]}
silenceBy: ["slack:U0ALICE"]
`

// TestAcknowledgeAndSilenceFromSlackThroughServe runs serve against the in-process argocd-server with Slack's
// buttons over Socket Mode on the Slack test server. The incident is announced with Fix…, Acknowledge and
// Silence…; a member the policy does not name is refused both; the permitted member's Acknowledge is recorded once
// however often it is clicked (one thread reply, the incident API names them) and their Silence… creates the
// silence of this incident, which the API shows; nothing is done to the object.
func TestAcknowledgeAndSilenceFromSlackThroughServe(t *testing.T) {
	token := testToken("api-token-for-the-slack-test")
	env, slack, argo, r := startOnCallServe(t, token, writeFile(t, "policy.yaml", slackOnCallPolicy),
		"--slack-app-token-file", writeFile(t, "app-token", slackrec.AppToken+"\n"))
	require.NoError(t, slack.WaitSocket(time.Minute), "the leader opens the Socket Mode connection: %s", r.Logs)
	auth := http.Header{"Authorization": {"Bearer " + token}}

	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: the finished
	// operation and the hook it leaked are written as leakedHook says. What this test proves is what a click in
	// Slack does through serve, which is all real.
	job := leakedHook(t, argo, "oncall-shop")
	var root slackrec.Message
	require.Eventually(t, func() bool {
		roots := slack.Roots(job.Namespace + "/" + job.Name)
		if len(roots) == 1 {
			root = roots[0]
		}
		return len(roots) == 1
	}, 60*time.Second, 100*time.Millisecond, slack.Summary())
	id := buttonValue(t, root.Blocks, slacknotify.ActionAcknowledge)
	require.Equal(t, id, buttonValue(t, root.Blocks, slacknotify.ActionFix))
	require.Equal(t, id, buttonValue(t, root.Blocks, slacknotify.ActionSilence))
	click := func(envelope, user, name, action string) {
		t.Helper()
		_, err := slack.Deliver(envelope, slackrec.BlockActions(user, name, "T0TEST", root.Channel, root.TS, action, id, "trig-"+envelope), 10*time.Second)
		require.NoError(t, err)
	}
	incidentNow := func() ui.Incident {
		t.Helper()
		code, _, body := apiIncidents(r.Base+ui.IncidentsPath+"/"+id, auth)
		require.Equal(t, http.StatusOK, code, body)
		var inc ui.Incident
		require.NoError(t, json.Unmarshal([]byte(body), &inc))
		return inc
	}
	acks := func() []string {
		var out []string
		for _, m := range slack.Thread(root.TS) {
			if m.ThreadTS == root.TS && strings.Contains(m.Text, "Acknowledged by") {
				out = append(out, m.Text)
			}
		}
		return out
	}

	t.Run("a member the policy does not name cannot acknowledge: only they are told", func(t *testing.T) {
		click("mallory-ack", "U0MALLORY", "mallory", slacknotify.ActionAcknowledge)
		require.Eventually(t, func() bool { return len(slack.Ephemerals()) == 1 }, 10*time.Second, 50*time.Millisecond, r.Logs.String())
		e := slack.Ephemerals()[0]
		require.Equal(t, "U0MALLORY", e.User)
		require.Contains(t, e.Text, "slack user mallory (U0MALLORY) via slack may not acknowledge argocd/hook-finalizer-stuck")
		require.Nil(t, incidentNow().Ack)
		require.Empty(t, acks())
	})
	t.Run("the permitted member's acknowledgement is recorded once, however often they click", func(t *testing.T) {
		click("alice-ack-1", "U0ALICE", "alice", slacknotify.ActionAcknowledge)
		require.Eventually(t, func() bool { return len(acks()) == 1 }, 10*time.Second, 50*time.Millisecond, slack.Summary())
		require.Equal(t, ":raising_hand: Acknowledged by slack user alice (U0ALICE).", acks()[0])
		click("alice-ack-2", "U0ALICE", "alice", slacknotify.ActionAcknowledge)
		time.Sleep(time.Second)
		require.Len(t, acks(), 1, "a repeated click announces nothing")
		require.Equal(t, "slack user alice (U0ALICE)", incidentNow().Ack.By)
		require.Len(t, slack.Ephemerals(), 1, "and is not an error")
	})
	silenceValues := map[string]any{
		"silence.for":     map[string]any{"silence.for": map[string]any{"type": "static_select", "selected_option": map[string]any{"value": "1h0m0s"}}},
		"silence.comment": map[string]any{"silence.comment": map[string]any{"type": "plain_text_input", "value": "migration window"}},
	}
	submitSilence := func(envelope, user, name string) slackrec.Ack {
		t.Helper()
		n := len(slack.Views())
		click(envelope+"-click", user, name, slacknotify.ActionSilence)
		require.Eventually(t, func() bool { return len(slack.Views()) == n+1 }, 10*time.Second, 50*time.Millisecond)
		v := slack.Views()[n]
		ack, err := slack.Deliver(envelope+"-submit", slackrec.ViewSubmission(user, name, "T0TEST", v.ViewID, json.RawMessage(v.View), silenceValues), 10*time.Second)
		require.NoError(t, err)
		return ack
	}
	t.Run("a member the policy does not name cannot silence: the dialog says why", func(t *testing.T) {
		ack := submitSilence("mallory-silence", "U0MALLORY", "mallory")
		require.Contains(t, string(ack.Payload), `"response_action":"errors"`)
		require.Contains(t, string(ack.Payload), "may not create silences (silenceBy)")
		require.Empty(t, incidentNow().SilencedBy)
	})
	t.Run("the permitted member's Silence… silences this incident, as the API shows", func(t *testing.T) {
		ack := submitSilence("alice-silence", "U0ALICE", "alice")
		require.JSONEq(t, `{"response_action":"clear"}`, string(ack.Payload))
		inc := incidentNow()
		require.NotEmpty(t, inc.SilencedBy)
		code, _, body := apiIncidents(r.Base+ui.SilencesPath+"/"+inc.SilencedBy, auth)
		require.Equal(t, http.StatusOK, code, body)
		var s ui.Silence
		require.NoError(t, json.Unmarshal([]byte(body), &s))
		require.Equal(t, "slack user alice (U0ALICE)", s.CreatedBy)
		require.Equal(t, "migration window", s.Comment)
		require.Equal(t, "active", string(s.State))
		require.InDelta(t, time.Hour.Seconds(), s.EndsAt.Sub(s.StartsAt).Seconds(), 1)
		require.Contains(t, body, job.Name, "it matches the incident's object")
	})
	t.Run("nothing was done to the object", func(t *testing.T) {
		cur := &batchv1.Job{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur))
		require.Contains(t, cur.Finalizers, rules.HookFinalizer)
	})
}

// buttonValue returns the value of the button actionID in a message's blocks.
func buttonValue(t *testing.T, blocks, actionID string) string {
	t.Helper()
	var bs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(blocks), &bs))
	for _, b := range bs {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if m, ok := e.(map[string]any); ok && m["action_id"] == actionID {
				return m["value"].(string)
			}
		}
	}
	t.Fatalf("no button %s in %s", actionID, blocks)
	return ""
}

// slackSilencePolicy is notify-only for the held hook finalizer, with the Slack member U0ALICE (and the API token
// holder, who expires the silence) allowed to silence; slackSilenceAutoPolicy is the same with the remedy automatic.
const slackSilencePolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 1s}
silenceBy: ["slack:U0ALICE", "token"]
`

const slackSilenceAutoPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 1s}
silenceBy: ["slack:U0ALICE", "token"]
`

// TestASilenceFromSlackHoldsBackASecondMatchingIncidentUntilItEnds: a member silences an announced incident from
// its thread (Silence…); the incident is fixed by hand and resolves; the policy turns the remedy automatic; the same
// hook is held again, a second incident the silence matches: it is tracked (silenced, unannounced) but neither
// announced nor remedied while the silence lasts. When the silence ends (expired through the API) the still-open
// incident is announced and remedied unattended.
func TestASilenceFromSlackHoldsBackASecondMatchingIncidentUntilItEnds(t *testing.T) {
	token := testToken("api-token-for-the-slack-silence-test")
	policyFile := writeFile(t, "policy.yaml", slackSilencePolicy)
	env, slack, argo, r := startOnCallServe(t, token, policyFile, "--policy-reload-interval", "1s", "--argocd-live-resync", "2s",
		"--slack-app-token-file", writeFile(t, "app-token", slackrec.AppToken+"\n"))
	require.NoError(t, slack.WaitSocket(time.Minute), "the leader opens the Socket Mode connection: %s", r.Logs)
	auth := http.Header{"Authorization": {"Bearer " + token}}
	incidents := func(ns string) []ui.Incident {
		t.Helper()
		code, _, body := apiIncidents(r.Base+ui.IncidentsPath+"?state=all&namespace="+ns, auth)
		require.Equal(t, http.StatusOK, code, body)
		var l ui.IncidentList
		require.NoError(t, json.Unmarshal([]byte(body), &l))
		return l.Items
	}

	// hand-written state: see leakedHook. The in-process argocd-server has no application-controller: the finished
	// operation and the hook it leaked are written as leakedHook says. What this test proves is what serve does
	// with the incidents and the silence made in Slack, which is all real.
	job := leakedHook(t, argo, "silenced-shop")
	object := job.Namespace + "/" + job.Name
	require.Eventually(t, func() bool { return len(slack.Roots(object)) == 1 }, 60*time.Second, 100*time.Millisecond, slack.Summary())
	root := slack.Roots(object)[0]
	first := buttonValue(t, root.Blocks, slacknotify.ActionSilence)

	var silenceID string
	t.Run("the member silences the announced incident from its thread", func(t *testing.T) {
		_, err := slack.Deliver("silence-click", slackrec.BlockActions("U0ALICE", "alice", "T0TEST", root.Channel, root.TS, slacknotify.ActionSilence, first, "trig"), 10*time.Second)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(slack.Views()) == 1 }, 10*time.Second, 50*time.Millisecond)
		v := slack.Views()[0]
		values := map[string]any{
			"silence.for":     map[string]any{"silence.for": map[string]any{"type": "static_select", "selected_option": map[string]any{"value": "1h0m0s"}}},
			"silence.comment": map[string]any{"silence.comment": map[string]any{"type": "plain_text_input", "value": "migration week"}},
		}
		ack, err := slack.Deliver("silence-submit", slackrec.ViewSubmission("U0ALICE", "alice", "T0TEST", v.ViewID, json.RawMessage(v.View), values), 10*time.Second)
		require.NoError(t, err)
		require.JSONEq(t, `{"response_action":"clear"}`, string(ack.Payload))
		items := incidents(job.Namespace)
		require.Len(t, items, 1)
		silenceID = items[0].SilencedBy
		require.NotEmpty(t, silenceID)
	})
	t.Run("fixed by hand, the first incident resolves", func(t *testing.T) {
		removeFinalizers(t, env, job)
		requireGone(t, env, job)
		require.Eventually(t, func() bool {
			items := incidents(job.Namespace)
			return len(items) == 1 && items[0].State == "resolved"
		}, 60*time.Second, 200*time.Millisecond, r.Logs.String())
	})
	require.NoError(t, os.WriteFile(policyFile, []byte(slackSilenceAutoPolicy), 0o600))
	time.Sleep(3 * time.Second) // --policy-reload-interval 1s: the automatic remedy is in force

	// hand-written state: see leakedHook: the same hook held again after a new finished operation (heldAgain).
	again := heldAgain(t, argo, "silenced-shop", job.Namespace)
	var second ui.Incident
	t.Run("a second incident the silence matches is tracked, silenced and unannounced", func(t *testing.T) {
		require.Eventually(t, func() bool {
			for _, inc := range incidents(job.Namespace) {
				if inc.ID != first && inc.State != "resolved" {
					second = inc
					return true
				}
			}
			return false
		}, 60*time.Second, 200*time.Millisecond, r.Logs.String())
		require.Equal(t, silenceID, second.SilencedBy)
		require.True(t, second.Unannounced)
	})
	t.Run("while the silence lasts it is neither announced nor remedied", func(t *testing.T) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			require.Len(t, slack.Roots(object), 1, slack.Summary())
			cur := &batchv1.Job{}
			require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(again), cur))
			require.Contains(t, cur.Finalizers, rules.HookFinalizer, "no automatic remedy while silenced")
			time.Sleep(500 * time.Millisecond)
		}
	})
	t.Run("when the silence ends the still-open incident is announced, then remedied", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodDelete, r.Base+ui.SilencesPath+"/"+silenceID, nil)
		require.NoError(t, err)
		req.Header = auth.Clone()
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Eventually(t, func() bool { return len(slack.Roots(object)) == 2 }, 60*time.Second, 100*time.Millisecond, slack.Summary())
		require.Contains(t, slack.Roots(object)[1].Blocks, "incident `"+second.ID+"`", "the second root is the second incident")
		requireGone(t, env, again)
	})
}

// heldAgain holds hook Job "migrate" of app in namespace again, after a new finished operation that ran it, as
// leakedHook does the first time.
func heldAgain(t *testing.T, argo *testenv.ArgoCDServer, app, namespace string) *batchv1.Job {
	t.Helper()
	job := testenv.ScenarioHookFinalizerStuck(t, argo.Env, testenv.HookJob{Namespace: namespace, App: app})
	// hand-written state: the leaked hook in the app's cached tree (see leakedHook's doc: the in-process argocd-server
	// runs no application-controller).
	argo.SetResources(t, app, job)
	started := metav1.NewTime(time.Now().Add(-10 * time.Second).Truncate(time.Second))
	finished := metav1.NewTime(started.Add(5 * time.Second))
	// hand-written state: the new finished operation that leaked the hook again (see leakedHook's doc: the
	// in-process argocd-server runs no application-controller).
	argo.SetOperationState(t, app, &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: testenv.Revision}},
		Phase:     synccommon.OperationSucceeded, Message: "successfully synced (all tasks run)",
		StartedAt: started, FinishedAt: &finished,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: testenv.Revision, Resources: v1alpha1.ResourceResults{{
			Group: "batch", Version: "v1", Kind: "Job", Namespace: namespace, Name: job.Name,
			HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationSucceeded, SyncPhase: synccommon.SyncPhasePreSync,
		}}},
	})
	return job
}

// removeFinalizers removes every finalizer of job, as a person fixing it by hand does.
func removeFinalizers(t *testing.T, env *testenv.Env, job *batchv1.Job) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	require.NoError(t, env.Client.Patch(context.Background(), job.DeepCopy(), patch))
}

// startOnCallServe starts serve against an in-process argocd-server whose account syncmedic may get and update
// applications, with Slack on a test server (channel #incidents), the incident API on token, the policy file
// policyFile, Flux and Kubernetes Events off, and the extra flags; it returns the control plane, the Slack test
// server, argocd-server and serve.
func startOnCallServe(t *testing.T, token, policyFile string, extra ...string) (*testenv.Env, *slackrec.Server, *testenv.ArgoCDServer, *runningServe) {
	t.Helper()
	env := testenv.Kube(t)
	slack := slackrec.New(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"syncmedic"},
		Policy: []string{"p, role:syncmedic, applications, get, */*, allow", "p, role:syncmedic, applications, update, */*, allow",
			"g, syncmedic, role:syncmedic"},
	})
	args := []string{"--kubeconfig", env.Kubeconfig,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"),
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", argo.Token(t, "syncmedic")),
		"--policy-file", policyFile, "--flux-watch=false", "--kube-events=false",
		"--slack-token-file", writeFile(t, "slack-token", "xoxb-on-call-test\n"), "--slack-channel", "#incidents",
		"--slack-api-url", slack.GetAPIURL()}
	return env, slack, argo, startServe(t, append(args, extra...)...)
}
