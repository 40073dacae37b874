package argo

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	smincident "github.com/syncmedic/syncmedic/incident"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
)

// slackFixPolicy lets only the Slack member U0ALICE fix a held hook finalizer on demand; nothing is done unattended.
const slackFixPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 3s, fixBy: ["slack:U0ALICE"]}
` + routes

// Issue 31: Fix… in the Slack thread, on the real Argo CD v2.14.21 stack. An old PreSync hook left holding
// argocd.argoproj.io/hook-finalizer (as v2.14.3 left it; played) blocks the second sync, which deletes it and waits.
// serve announces it with a Fix… button and receives clicks over Socket Mode. A member outside fixBy is refused in
// the modal and nothing changes; the permitted member clicks Fix…, sees the dry-run plan, clicks Apply: the finalizer
// goes through argocd-server, the real controller's same sync completes, and the thread, the log line and the
// Kubernetes Event name the member.
func TestFixFromTheSlackThreadOnTheRealController(t *testing.T) {
	env := argoEnv(t)
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: testenv.ArgoCDV2})
	app, start := testenv.ScenarioRealOldHookHeldBy(t, stack, testenv.HookFinalizer)
	require.True(t, app.WaitJob(t, "migrate", controllerWindow, func(j *batchv1.Job) bool {
		return j != nil && j.DeletionTimestamp != nil && slices.Contains(j.Finalizers, testenv.HookFinalizer)
	}), "the controller deletes the old hook, which the hook finalizer holds")
	running := app.Get(t)
	require.Equal(t, synccommon.OperationRunning, phase(running), testenv.DescribeOperation(running))

	appToken := filepath.Join(t.TempDir(), "app-token")
	require.NoError(t, os.WriteFile(appToken, []byte(slackrec.AppToken+"\n"), 0o600))
	d := startServeDaemon(t, app, slackFixPolicy, "--slack-app-token-file", appToken)
	srv := d.slack
	require.NoError(t, srv.WaitSocket(time.Minute), "serve opens the Socket Mode connection: %s", d.logs)

	root := announcedAbout(t, srv, syncmedic.RuleHookFinalizerStuck, jobObject(app, "migrate"), announceWithin)
	id := buttonValue(t, root.Blocks, slacknotify.ActionFix)
	require.True(t, strings.HasPrefix(id, findingAbout(t, dialStack(t, stack), app, syncmedic.RuleHookFinalizerStuck, "migrate").Fingerprint+"-"),
		"the Fix… button carries the incident ID: %s", id)
	held := func() bool {
		job, _ := app.JobState(t, "migrate")
		return job != nil && slices.Contains(job.Finalizers, testenv.HookFinalizer)
	}

	t.Run("a member outside fixBy is refused in the modal and nothing changes", func(t *testing.T) {
		_, err := srv.Deliver("env-mallory", slackrec.BlockActions("U0MALLORY", "mallory", "T0TEST", "C0INC", root.TS, slacknotify.ActionFix, id, "trig-mallory"), 10*time.Second)
		require.NoError(t, err)
		v := waitView(t, srv, 1)
		require.Nil(t, v["submit"], "no Apply for mallory: %v", v)
		require.Contains(t, mustMarshal(t, v["blocks"]), "slack user mallory (U0MALLORY) via slack is not in fixBy (slack:U0ALICE)")
		require.False(t, waitFor(5*time.Second, func() bool { return !held() }), "the finalizer is still there")
		require.Empty(t, remediesApplied(srv), srv.summary())
		require.Equal(t, synccommon.OperationRunning, phase(app.Get(t)))
	})

	t.Run("the permitted member sees the plan, applies it, and the real controller's sync completes", func(t *testing.T) {
		_, err := srv.Deliver("env-alice-1", slackrec.BlockActions("U0ALICE", "alice", "T0TEST", "C0INC", root.TS, slacknotify.ActionFix, id, "trig-alice"), 10*time.Second)
		require.NoError(t, err)
		v := waitView(t, srv, 2)
		m := srv.Views()[1]
		require.Equal(t, "trig-alice", m.TriggerID)
		require.Equal(t, "Apply", v["submit"].(map[string]any)["text"], "alice may apply: %v", v)
		plan := mustMarshal(t, v["blocks"])
		require.Contains(t, plan, "PatchResource")
		require.Contains(t, plan, "slack:U0ALICE")
		require.True(t, held(), "the plan changed nothing")

		ack, err := srv.Deliver("env-alice-2", slackrec.ViewSubmission("U0ALICE", "alice", "T0TEST", m.ViewID, json.RawMessage(m.View), map[string]any{}), 10*time.Second)
		require.NoError(t, err)
		outcome := string(ack.Payload)
		if !strings.Contains(outcome, "succeeded") { // the fix took longer than Slack's answer: the modal is updated
			require.Contains(t, outcome, "Applying the fix")
			outcome = mustMarshal(t, waitView(t, srv, 3)["blocks"])
		}
		require.Contains(t, outcome, "succeeded (changed)")
		require.Contains(t, outcome, "slack user alice (U0ALICE) via slack")

		after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
		require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the real controller finishes the same sync: %s", testenv.DescribeOperation(after))
		require.True(t, after.Status.OperationState.StartedAt.Equal(&running.Status.OperationState.StartedAt), "no new sync was needed")
	})

	t.Run("the thread names the member, and the resolved root loses its buttons", func(t *testing.T) {
		require.Eventually(t, func() bool {
			for _, r := range srv.replies(root.TS) {
				if strings.Contains(r, "succeeded") && strings.Contains(r, "Requested by slack user alice (U0ALICE) via slack") {
					return true
				}
			}
			return false
		}, announceWithin, tick, srv.summary())
		require.Len(t, remediesApplied(srv), 1, srv.summary())
		require.Contains(t, d.logs.String(), `requestedBy="slack user alice (U0ALICE) via slack"`)
		require.Eventually(t, func() bool {
			var evs corev1.EventList
			if err := stack.Env.Client.List(context.Background(), &evs, client.InNamespace(app.Namespace)); err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == smincident.EventReasonRemediation && e.InvolvedObject.Name == "migrate" &&
					strings.Contains(e.Message, "at the request of slack user alice (U0ALICE) via slack") {
					return true
				}
			}
			return false
		}, announceWithin, tick, "the Kubernetes Event on the Job names the member")
		require.Eventually(t, func() bool {
			ups := srv.Thread(root.TS)
			last := ""
			for _, m := range ups {
				if m.Method == "chat.update" {
					last = m.Blocks
				}
			}
			return strings.Contains(last, "Resolved") && !strings.Contains(last, slacknotify.ActionFix)
		}, announceWithin, tick, srv.summary())
		onlyAnnounced(t, srv, incident{rule: syncmedic.RuleHookFinalizerStuck, object: jobObject(app, "migrate")})
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

// waitView waits for the n-th views.open or views.update call and returns its view.
func waitView(t *testing.T, srv *fakeSlack, n int) map[string]any {
	t.Helper()
	require.Eventually(t, func() bool { return len(srv.Views()) >= n }, 30*time.Second, tick, "views: %+v", srv.Views())
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(srv.Views()[n-1].View), &v))
	return v
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
