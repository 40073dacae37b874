package argo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/ui"
)

// slackSilenceNotifyPolicy reports a held hook finalizer and lets the Slack member U0ALICE silence; nothing is done
// unattended. slackSilenceAutoPolicy is the same with the remedy automatic (remove-hook-finalizer: no operation
// runs, so no sync follows and no hook runs again).
const (
	slackSilenceNotifyPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 3s}
silenceBy: ["slack:U0ALICE"]
` + routes
	slackSilenceAutoPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
silenceBy: ["slack:U0ALICE"]
` + routes
)

// slackSilenceFor is the Silence… choice the member picks: short enough for a test, long enough for the second
// incident to be tracked well before it ends (serve offers it through --slack-silence-durations).
const slackSilenceFor = 20 * time.Second

// Issue 31: a silence made from Slack, on the real Argo CD stacks. A finished PreSync hook Job holds the hook
// finalizer (as v2.14.3 or a leaky 3.0.x left it; played) and serve announces it. The member clicks Silence… in the
// thread and picks 20 seconds: a silence of incidents like this one (same rule, namespace, application and object).
// The hook is released by hand and the incident resolves; the policy turns the remedy automatic; the older
// release's finalizer is left on the hook again, and serve is restarted (it looks for a left hook finalizer once
// per finished sync, and at start: the real controller makes no new sync here), keeping its state file: a second
// incident the stored silence matches. It is tracked and shown silenced, but not announced on Slack and not
// remedied: argocd-server's audit (its Events on the Application) records no PatchResource, Sync or Terminate, the
// Job keeps its finalizer, the incident has no attempt. When the silence ends by itself (no one expires it), the
// still-open incident is announced — the exact rule and object, the second incident's ID — and then, per the
// policy, remedied unattended: one PatchResource, the operation untouched.
func TestASilenceFromSlackHoldsBackASecondIncidentOnTheRealController(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a silence from Slack holds back a second incident until it ends by itself", func(t *testing.T) {
			t.Parallel()
			r := row(version, "silence from Slack (Silence… for 20 seconds) over a second hook-finalizer-stuck incident of the same hook Job (hook finalizer left by an older release, played), remedy automatic")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			began := time.Now()
			app := testenv.ScenarioRealHookWithLeftoverFinalizer(t, stack)
			job, jobDesc := app.JobState(t, "migrate")
			require.NotNil(t, job)
			require.Equal(t, "Complete, finalizers ["+testenv.HookFinalizer+"]", jobDesc)
			synced := app.Get(t)
			require.NotNil(t, synced.Status.OperationState)
			r.Controller = fmt.Sprintf("first sync %s; hook Job %s", synced.Status.OperationState.Phase, jobDesc)
			audit := argoAudit(t, stack, app)
			require.Len(t, audit, 1, "argocd-server audited the test's sync: %v", audit)
			require.True(t, strings.HasPrefix(audit[0], "admin initiated sync to "), audit[0])

			dir := t.TempDir()
			policyFile := filepath.Join(dir, "policy.yaml")
			require.NoError(t, os.WriteFile(policyFile, []byte(slackSilenceNotifyPolicy), 0o600))
			appToken := filepath.Join(dir, "app-token")
			require.NoError(t, os.WriteFile(appToken, []byte(slackrec.AppToken+"\n"), 0o600))
			apiToken := "conformance-silence-token-0123456789abcdef"
			apiTokenFile := filepath.Join(dir, "api-token")
			require.NoError(t, os.WriteFile(apiTokenFile, []byte(apiToken+"\n"), 0o600))
			// v2.14.21 never leaves the hook finalizer, so serve looks for one only when told to (--argocd-hook-leak-check
			// always: the leftover of a v2.14.3 before the upgrade); v3.x may leave it (auto looks there anyway).
			flags := []string{"--argocd-hook-leak-check", "always", "--policy-file", policyFile, "--policy-reload-interval", "1s", "--state-file", filepath.Join(dir, "state.json"),
				"--slack-app-token-file", appToken, "--slack-silence-durations", slackSilenceFor.String() + ",1h", "--api-token-file", apiTokenFile}
			d := startServeDaemon(t, app, slackSilenceNotifyPolicy, flags...)
			srv := d.slack
			require.NoError(t, srv.WaitSocket(time.Minute), "serve opens the Socket Mode connection: %s", d.logs)
			api := incidentAPI{t: t, base: "http://" + d.addr, token: apiToken}
			held := incident{rule: syncmedic.RuleHookFinalizerStuck, object: jobObject(app, "migrate")}

			root := announcedAbout(t, srv, held.rule, held.object, announceWithin)
			first := buttonValue(t, root.Blocks, slacknotify.ActionSilence)

			var sil ui.Silence
			t.Run("the member silences the announced incident from its thread for 20 seconds", func(t *testing.T) {
				_, err := srv.Deliver("silence-click", slackrec.BlockActions("U0ALICE", "alice", "T0TEST", root.Channel, root.TS, slacknotify.ActionSilence, first, "trig-silence"), 10*time.Second)
				require.NoError(t, err)
				v := waitView(t, srv, 1)
				m := srv.Views()[0]
				choice := silenceChoice(t, v, "20 seconds")
				values := map[string]any{
					"silence.for":     map[string]any{"silence.for": map[string]any{"type": "static_select", "selected_option": map[string]any{"value": choice}}},
					"silence.comment": map[string]any{"silence.comment": map[string]any{"type": "plain_text_input", "value": "migration hook under repair"}},
				}
				ack, err := srv.Deliver("silence-submit", slackrec.ViewSubmission("U0ALICE", "alice", "T0TEST", m.ViewID, json.RawMessage(m.View), values), 10*time.Second)
				require.NoError(t, err)
				require.JSONEq(t, `{"response_action":"clear"}`, string(ack.Payload))
				inc := api.incident(first)
				require.NotEmpty(t, inc.SilencedBy, "the announced incident is silenced")
				api.get(ui.SilencesPath+"/"+inc.SilencedBy, &sil)
				require.Equal(t, "slack user alice (U0ALICE)", sil.CreatedBy)
				require.Equal(t, "active", string(sil.State))
				require.InDelta(t, slackSilenceFor.Seconds(), sil.EndsAt.Sub(sil.StartsAt).Seconds(), 0.5)
				var ms []string
				for _, m := range sil.Matchers {
					ms = append(ms, m.String())
				}
				// The incident's silence pins every label the incident has: the Job, its Application, and the Application's
				// namespace and project, so it mutes no other team's application of the same name.
				require.Equal(t, []string{`rule="` + string(held.rule) + `"`, `namespace="` + app.Namespace + `"`, `kind="Job"`, `app="` + app.Name + `"`,
					`appNamespace="` + synced.Namespace + `"`, `project="` + synced.Spec.Project + `"`, `name="migrate"`}, ms)
			})

			t.Run("released by hand, the first incident resolves", func(t *testing.T) {
				app.SetJobFinalizers(t, "migrate")
				require.Eventually(t, func() bool { return api.incident(first).State == "resolved" }, announceWithin, tick, d.logs.String())
			})
			// The policy turns the remedy automatic, the older release's finalizer is on the hook again (played, as
			// ScenarioRealHookWithLeftoverFinalizer does), and serve starts again on the same state.
			require.NoError(t, os.WriteFile(policyFile, []byte(slackSilenceAutoPolicy), 0o600))
			app.SetJobFinalizers(t, "migrate", testenv.HookFinalizer)
			d.stop()
			firstLogs := d.logs.String()
			d = startServeDaemonOn(t, app, srv, slackSilenceAutoPolicy, flags...)
			api.base = "http://" + d.addr
			var second ui.Incident
			t.Run("a second incident the silence matches is tracked, silenced and unannounced", func(t *testing.T) {
				require.Eventually(t, func() bool {
					for _, inc := range api.incidents(app.Namespace) {
						if inc.ID != first && inc.State != "resolved" {
							second = inc
							return true
						}
					}
					return false
				}, announceWithin, tick, d.logs.String())
				require.Equal(t, string(held.rule), second.Rule)
				require.Equal(t, sil.ID, second.SilencedBy)
				require.True(t, second.Unannounced)
				require.True(t, time.Now().Before(sil.EndsAt.Add(-5*time.Second)), "tracked well before the silence ends (at %s)", sil.EndsAt)
			})

			t.Run("while the silence lasts it is neither announced nor remedied", func(t *testing.T) {
				polls := 0
				for time.Now().Before(sil.EndsAt.Add(-time.Second)) {
					require.Len(t, srv.roots(), 1, "nothing but the first incident is announced: %s", srv.summary())
					cur, desc := app.JobState(t, "migrate")
					require.NotNil(t, cur)
					require.True(t, slices.Contains(cur.Finalizers, testenv.HookFinalizer), "no automatic remedy while silenced: %s", desc)
					require.Equal(t, audit, argoAudit(t, stack, app), "no PatchResource, Sync or Terminate through argocd-server")
					inc := api.incident(second.ID)
					require.Equal(t, sil.ID, inc.SilencedBy)
					require.True(t, inc.Unannounced)
					require.Empty(t, inc.Attempts, "no remediation attempt")
					polls++
					time.Sleep(time.Second)
				}
				require.Positive(t, polls)
				require.Empty(t, remediesApplied(srv), srv.summary())
				require.Contains(t, d.logs.String(), `silencedBy=`+sil.ID, "serve evaluated the silenced incident")
				require.Contains(t, d.metrics(), `syncmedic_notifications_suppressed_total{event="opened"} 1`)
			})

			t.Run("when the silence ends by itself the still-open incident is announced, then remedied", func(t *testing.T) {
				var again slackMessage
				require.Eventually(t, func() bool {
					roots := srv.roots()
					if len(roots) < 2 {
						return false
					}
					again = roots[1]
					return true
				}, announceWithin, tick, srv.summary())
				require.Equal(t, held, announcementOf(again), "the exact rule and object")
				require.Contains(t, again.Blocks, "incident `"+second.ID+"`", "the second root is the second incident")
				require.True(t, app.WaitJob(t, "migrate", remedyWithin, func(j *batchv1.Job) bool {
					return j != nil && !slices.Contains(j.Finalizers, testenv.HookFinalizer)
				}), "the automatic remedy removes the hook finalizer: %s", srv.summary())
				require.Eventually(t, func() bool { return len(argoAudit(t, stack, app)) == 2 }, announceWithin, tick)
				after := argoAudit(t, stack, app)
				require.Equal(t, append(slices.Clone(audit), "admin patched resource batch/Job 'migrate'"), after, "one PatchResource, no Sync, no Terminate")
				applied := remediesApplied(srv)
				require.Len(t, applied, 1, srv.summary())
				var reply slackMessage
				for _, m := range srv.all() {
					if m.Method == "chat.postMessage" && m.Text == applied[0] {
						reply = m
					}
				}
				require.Equal(t, again.TS, reply.ThreadTS, "in the second incident's thread")
				require.Less(t, position(srv, "", again.TS), position(srv, again.TS, reply.TS), "announced before it is remedied")
				inc := api.incident(second.ID)
				require.Empty(t, inc.SilencedBy)
				require.Len(t, inc.Attempts, 1)
				require.Equal(t, "succeeded", inc.Attempts[0].Result)
				require.Empty(t, inc.Attempts[0].RequestedBy, "unattended")
				logs := d.logs.String()
				require.Contains(t, logs, "incident announced: no silence mutes it any more")
				require.NotContains(t, firstLogs+logs, "silence expired", "no one expired the silence")
				var s ui.Silence
				api.get(ui.SilencesPath+"/"+sil.ID, &s)
				require.Equal(t, "expired", string(s.State))
				require.True(t, s.EndsAt.Equal(sil.EndsAt), "it ended when it was made to")
				require.Regexp(t, `syncmedic_remediations_total\{action="argocd/remove-hook-finalizer",result="succeeded",rule="argocd/hook-finalizer-stuck"\} 1\b`, d.metrics())
				cur := app.Get(t)
				require.True(t, cur.Status.OperationState.StartedAt.Equal(&synced.Status.OperationState.StartedAt), "no new sync: %s", testenv.DescribeOperation(cur))
				require.Len(t, cur.Status.History, len(synced.Status.History))
				require.Len(t, srv.roots(), 2, srv.summary())
				onlyAnnounced(t, srv, held)
				_, jobAfter := app.JobState(t, "migrate")
				r.Syncmedic = fmt.Sprintf("announced %s; Silence… for 20 seconds from the thread by alice: silence %v; "+
					"released by hand, the incident resolved; the finalizer left again, serve restarted on its state file: a second incident, tracked silenced and unannounced, "+
					"no attempt and nothing in argocd-server's audit while the silence lasted; when it ended by itself: announced (%d incidents, each %s), "+
					"then remedied unattended (%s %s; audit: %s); Job then %s; operation %s (no new sync)",
					held.rule, matcherNames(sil), len(srv.roots()), held.rule, inc.Attempts[0].Action, inc.Attempts[0].Result,
					after[len(after)-1], jobAfter, cur.Status.OperationState.Phase)
			})
			t.Logf("on %s: %s from the scenario's start", version, time.Since(began).Round(time.Second))
		})
	}
}

// silenceChoice returns the value of the Silence… dialog's duration option whose text is text.
func silenceChoice(t *testing.T, view map[string]any, text string) string {
	t.Helper()
	blocks, _ := view["blocks"].([]any)
	for _, b := range blocks {
		el, _ := b.(map[string]any)["element"].(map[string]any)
		opts, _ := el["options"].([]any)
		for _, o := range opts {
			o := o.(map[string]any)
			if o["text"].(map[string]any)["text"] == text {
				return o["value"].(string)
			}
		}
	}
	t.Fatalf("the Silence… dialog offers no %q: %v", text, view)
	return ""
}

// matcherNames lists the labels a silence matches on, in order.
func matcherNames(s ui.Silence) []string {
	var out []string
	for _, m := range s.Matchers {
		out = append(out, m.Name)
	}
	return out
}

// argoAudit returns what argocd-server audited of the admin account's calls on app (PatchResource, Sync,
// TerminateOperation, DeleteResource...: its Events on the Application whose message begins with the user), in the
// order they were made; syncmedic serve and the test both call as admin.
func argoAudit(t *testing.T, stack *testenv.RealArgoCD, app *testenv.RealHookApp) []string {
	t.Helper()
	var evs corev1.EventList
	require.NoError(t, stack.Env.Client.List(context.Background(), &evs, client.InNamespace(stack.Namespace)))
	slices.SortStableFunc(evs.Items, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Application" && e.InvolvedObject.Name == app.Name && strings.HasPrefix(e.Message, "admin ") {
			out = append(out, e.Message)
		}
	}
	return out
}

// incidentAPI reads serve's incident API with its bearer token.
type incidentAPI struct {
	t     *testing.T
	base  string
	token string
}

// get decodes the JSON answer of GET path into v; anything but 200 fails the test.
func (a incidentAPI) get(path string, v any) {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	require.NoError(a.t, err)
	req.Header.Set("Authorization", "Bearer "+a.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer func() { _ = res.Body.Close() }()
	require.Equal(a.t, http.StatusOK, res.StatusCode, "GET %s", path)
	require.NoError(a.t, json.NewDecoder(res.Body).Decode(v))
}

// incident returns incident id.
func (a incidentAPI) incident(id string) ui.Incident {
	a.t.Helper()
	var inc ui.Incident
	a.get(ui.IncidentsPath+"/"+id, &inc)
	return inc
}

// incidents returns every incident (resolved ones too) of objects in namespace.
func (a incidentAPI) incidents(namespace string) []ui.Incident {
	a.t.Helper()
	var l ui.IncidentList
	a.get(ui.IncidentsPath+"?state=all&namespace="+namespace, &l)
	return l.Items
}

// metrics returns serve's /metrics.
func (d *serveDaemon) metrics() string {
	res, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// position is where the message with ts, in the thread of threadTS ("" for a root), is in the order Slack got
// messages (-1: none).
func position(srv *fakeSlack, threadTS, ts string) int {
	for i, m := range srv.all() {
		if m.Method == "chat.postMessage" && m.ThreadTS == threadTS && m.TS == ts {
			return i
		}
	}
	return -1
}
