package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd"
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
	env := testenv.Kube(t)
	slack := slackrec.New(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"syncmedic"},
		Policy: []string{"p, role:syncmedic, applications, get, */*, allow", "p, role:syncmedic, applications, update, */*, allow",
			"g, syncmedic, role:syncmedic"},
	})
	token := "api-token-for-the-slack-test"
	r := startServe(t, "--kubeconfig", env.Kubeconfig,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--api-token-file", writeFile(t, "api-token", token+"\n"),
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", argo.Token(t, "syncmedic")),
		"--policy-file", writeFile(t, "policy.yaml", slackOnCallPolicy), "--flux-watch=false", "--kube-events=false",
		"--slack-token-file", writeFile(t, "slack-token", "xoxb-slack-test\n"), "--slack-channel", "#incidents",
		"--slack-api-url", slack.GetAPIURL(), "--slack-app-token-file", writeFile(t, "app-token", slackrec.AppToken+"\n"))
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
		require.Contains(t, cur.Finalizers, argocd.HookFinalizer)
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
