package argo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Thresholds of coveragePolicy: a sync may wait healthThreshold for a resource's health, and a failed automated sync
// may stay unretried autoSyncThreshold, before serve reports it.
const (
	healthThreshold   = 45 * time.Second
	autoSyncThreshold = 60 * time.Second
)

// coveragePolicy notifies issue 30's two Argo CD rules (items 3 and 4) with short thresholds; every other rule keeps
// its default (operation-stuck 30m).
var coveragePolicy = fmt.Sprintf(`resolveAfter: 1
rules:
  argocd/waiting-for-health: {mode: notify, threshold: %s}
  argocd/auto-sync-not-retried: {mode: notify, threshold: %s}
`, healthThreshold, autoSyncThreshold) + routes

// resolved reports whether the incident whose root message is root was updated as resolved.
func resolved(srv *fakeSlack, root slackMessage) bool {
	for _, m := range srv.all() {
		if m.Method == "chat.update" && m.TS == root.TS && strings.Contains(strings.ToLower(m.Text+m.Blocks), "resolved") {
			return true
		}
	}
	return false
}

// healthOf says how the application records the Deployment's health for a conformance row.
func healthOf(app *v1alpha1.Application) string {
	if h := testenv.ResourceHealth(app, "Deployment", testenv.HealthWaitDeployment); h != "" {
		return h
	}
	return "not persisted in status.resources (argocd-server fills it in from the resource tree)"
}

// Issue 30 item 4 (argo-cd #17314) on the real controllers: a sync whose first wave is a Deployment (wave -1, before
// the ConfigMap) waits for the Deployment's health before the next wave; the real deployment and replicaset
// controllers create its Pod, which runs on the real node and is never Ready (its readiness probe fails), so the
// Deployment stays Progressing and the operation Running on "waiting for healthy state of apps/Deployment/web". serve
// announces argocd/waiting-for-health about the Application, naming the Deployment and its health, and nothing else;
// once the Pod becomes Ready the sync moves on by itself and the incident resolves. The near miss: the same sync whose
// Pod becomes Ready within the threshold is not reported, and serve looked at it.
func TestSyncWaitingForHealthForever(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a sync waiting for a Deployment that never becomes healthy is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("sync waiting for the health of a Deployment whose Pod never becomes Ready (wave -1 before a ConfigMap; serve notify, waiting-for-health %s)", healthThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealHealthWait(t, stack, "never-healthy")
			srv := startServe(t, app.RealHookApp, coveragePolicy)
			want := incident{rule: syncmedic.RuleWaitingForHealth, object: appObject(app.RealHookApp)}
			root := announcedAbout(t, srv, want.rule, want.object, announceWithin+healthThreshold)
			got := app.Get(t)
			r.Controller = fmt.Sprintf("operation %s; Deployment health %s", testenv.DescribeOperation(got), healthOf(got))
			require.Equal(t, synccommon.OperationRunning, phase(got), "the sync still waits: %s", testenv.DescribeOperation(got))
			require.True(t, strings.HasPrefix(got.Status.OperationState.Message, testenv.HealthWaitMessage), testenv.DescribeOperation(got))
			deployment := "Deployment " + app.Namespace + "/" + testenv.HealthWaitDeployment
			require.Contains(t, root.Blocks, deployment, "the message names the Deployment")
			require.Contains(t, root.Blocks, "Progressing", "the message gives its health")
			require.Contains(t, root.Blocks, "argocd app terminate-op", "the message says how to abort")
			r.Syncmedic = "argocd/waiting-for-health announced about the Application, naming the Deployment, Progressing"

			app.MakeReady(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok, "the sync moves on once the Pod is Ready: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Eventually(t, func() bool { return resolved(srv, root) }, announceWithin, tick,
				"the incident resolves once the sync moved on: %s", srv.summary())
			r.Controller += "; Pod made Ready: " + testenv.DescribeOperation(after)
			r.Syncmedic += "; resolved once the Pod was Ready and the sync " + string(phase(after))
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.summary())
			onlyAnnounced(t, srv, want)
		})
		t.Run("on "+version+" a sync whose Deployment becomes healthy within the threshold is not reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("sync briefly waiting for the health of a Deployment whose Pod becomes Ready (serve notify, waiting-for-health %s)", healthThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealHealthWait(t, stack, "briefly-waiting")
			d := startServeDaemon(t, app.RealHookApp, coveragePolicy)
			from := d.logLen()
			// Let serve see the sync waiting, the Deployment Progressing, for a while (past the application's next
			// refresh, whose watch event carries the health on v3 too), then let the Pod become Ready.
			time.Sleep(healthThreshold / 2)
			require.NotEmpty(t, d.evaluations(app.RealHookApp, from), "serve evaluated the waiting sync")
			app.MakeReady(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			waited := time.Since(start).Round(time.Second)
			// The row says the bound, not the time measured: on the real node the Pod turns Ready at the kubelet's next
			// readiness probe (every 10 s), so the time varies from run to run.
			t.Logf("the sync finished %s after it started", waited)
			r.Controller = fmt.Sprintf("operation waited on %s for %s; then Pod made Ready: %s before the %s threshold", testenv.HealthWaitMessage, healthThreshold/2, testenv.DescribeOperation(after), healthThreshold)
			require.True(t, ok, "the sync moves on once the Pod is Ready: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Less(t, waited, healthThreshold, "the near miss must end within the threshold")
			// Watch until well past the threshold counted from the sync's start: a rule counting from it fires by then.
			window := max(nearMissWindow, time.Until(start.Add(healthThreshold+15*time.Second)))
			if waitFor(window, func() bool { return len(d.slack.roots()) > 0 }) {
				r.Syncmedic = "FALSE POSITIVE: " + d.slack.summary()
				t.Fatalf("nothing may be announced: %s", d.slack.summary())
			}
			n := d.lookedAt(t, app.RealHookApp, from, false)
			r.Syncmedic = fmt.Sprintf("no finding until %s after the sync started (waiting-for-health %s): evaluated %d times, nothing found", healthThreshold+15*time.Second, healthThreshold, n)
		})
	}
}

// Issue 30 item 3 (argo-cd #18442, #23591) on the real controllers: an app set to automated sync with no retries
// (retry limit 0) whose source has a ConfigMap for a namespace that does not exist; the real controller syncs the
// revision once, fails, and from then on skips it with a SyncError condition ("Failed last sync attempt to [SHA]" on
// v3.6.1, "Failed sync attempt to SHA" on v2.14.21). serve announces argocd/auto-sync-not-retried about the
// Application with the failure and the revision, and nothing else; a fixed commit is synced by the controller and
// the incident resolves. The near miss: the same failure fixed by a new commit within the threshold is not reported.
func TestFailedAutoSyncNeverRetried(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a failed automated sync the controller will not retry is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("automated sync (retry limit 0) failing on a ConfigMap for an absent namespace (serve notify, auto-sync-not-retried %s)", autoSyncThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, revision := testenv.ScenarioRealAutoSyncFails(t, stack, "autosync-fails")
			failed := app.Get(t)
			finished := failed.Status.OperationState.FinishedAt.Time
			srv := startServe(t, app, coveragePolicy)
			want := incident{rule: syncmedic.RuleAutoSyncNotRetried, object: appObject(app)}
			root := announcedAbout(t, srv, want.rule, want.object, announceWithin+autoSyncThreshold)
			got := app.Get(t)
			r.Controller = fmt.Sprintf("operation %s; %s", testenv.DescribeOperation(got), testenv.AutoSyncSkipped(got))
			require.Equal(t, synccommon.OperationFailed, phase(got), testenv.DescribeOperation(got))
			require.True(t, got.Status.OperationState.FinishedAt.Time.Equal(finished), "the controller did not sync again: %s", testenv.DescribeOperation(got))
			require.Contains(t, root.Blocks, revision[:7], "the message names the failed revision")
			require.Contains(t, root.Blocks, "not found", "the message gives the failure")
			r.Syncmedic = "argocd/auto-sync-not-retried announced about the Application, with the revision and the failure"

			fixed := app.FixAutoSync(t)
			after, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
				return testenv.OperationCompleted(a) && a.Status.OperationState.SyncResult != nil && a.Status.OperationState.SyncResult.Revision == fixed
			})
			require.True(t, ok, "the controller syncs the fixed commit: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Eventually(t, func() bool { return resolved(srv, root) }, announceWithin, tick,
				"the incident resolves once the new commit synced: %s", srv.summary())
			r.Controller += "; fixed commit: " + testenv.DescribeOperation(after)
			r.Syncmedic += "; resolved once the controller synced the fixed commit"
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.summary())
			onlyAnnounced(t, srv, want)
		})
		t.Run("on "+version+" a failed automated sync fixed by a new commit within the threshold is not reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("automated sync (retry limit 0) failing, then a fixed commit within the threshold (serve notify, auto-sync-not-retried %s)", autoSyncThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, _ := testenv.ScenarioRealAutoSyncFails(t, stack, "autosync-fixed")
			failedAt := app.Get(t).Status.OperationState.FinishedAt.Time
			d := startServeDaemon(t, app, coveragePolicy)
			from := d.logLen()
			fixed := app.FixAutoSync(t)
			after, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
				return testenv.OperationCompleted(a) && a.Status.OperationState.SyncResult != nil && a.Status.OperationState.SyncResult.Revision == fixed
			})
			took := time.Since(failedAt).Round(time.Second)
			r.Controller = fmt.Sprintf("failed, then the fixed commit synced by the controller (it took %s after the failure): %s", took, testenv.DescribeOperation(after))
			require.True(t, ok, "the controller syncs the fixed commit: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Less(t, took, autoSyncThreshold, "the near miss must end within the threshold")
			// Watch until well past the threshold counted from the failure: a rule counting from it fires by then.
			window := max(nearMissWindow, time.Until(failedAt.Add(autoSyncThreshold+15*time.Second)))
			if waitFor(window, func() bool { return len(d.slack.roots()) > 0 }) {
				r.Syncmedic = "FALSE POSITIVE: " + d.slack.summary()
				t.Fatalf("nothing may be announced: %s", d.slack.summary())
			}
			n := d.lookedAt(t, app, from, false)
			r.Syncmedic = fmt.Sprintf("no finding until %s after the failure (auto-sync-not-retried %s): evaluated %d times, nothing found", autoSyncThreshold+15*time.Second, autoSyncThreshold, n)
		})
	}
}
