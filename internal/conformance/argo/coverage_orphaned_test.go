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

// orphanThreshold is how long orphanPolicy lets an operation state stay Running with no operation behind it.
const orphanThreshold = 20 * time.Second

// orphanPolicy applies argocd/operation-orphaned's remedy (a new sync, so rerunHooks) after orphanThreshold; every
// other rule keeps its default (waiting-for-health 10m, operation-stuck 30m), so none fires within these tests.
var orphanPolicy = fmt.Sprintf(`resolveAfter: 1
rules:
  argocd/operation-orphaned: {mode: auto, threshold: %s, rerunHooks: true}
`, orphanThreshold) + routes

// Issue 30 item 2 (argo-cd #17155, #18613, #23765) on the real controllers: a sync waits for its Deployment's health
// (ScenarioRealHealthWait), and a person clears its .operation by hand — the workaround those issues pass around,
// and the state they report; no controller of these versions writes it (ClearOperation). The real controller leaves
// status.operationState Running from then on, even once the Deployment is healthy; argocd-server refuses to terminate
// it ("No operation is in progress") and a hard refresh leaves it as it is. serve on auto announces
// argocd/operation-orphaned about the Application and applies resync-orphaned once: a Sync through argocd-server,
// which replaces the orphaned state, and the controller runs the new operation to success. Nothing is terminated,
// nothing else is announced, and the incident resolves.
func TestOrphanedOperationStateIsReplacedByASync(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" an operation state left Running after .operation was cleared is reported and synced over once", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf(".operation of a sync waiting for health cleared by hand (argo-cd #17155 workaround, played), then the Pod made Ready (serve auto, operation-orphaned %s, rerunHooks)", orphanThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, _ := testenv.ScenarioRealHealthWait(t, stack, "orphaned")
			started := app.Get(t).Status.OperationState.StartedAt
			app.ClearOperation(t)
			app.MakeReady(t)
			// The controller would have finished the sync within this window had it still processed it.
			orphaned, changed := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
				return a.Operation != nil || phase(a) != synccommon.OperationRunning
			})
			require.False(t, changed, "the controller leaves the orphaned state alone: %s, operation %v", testenv.DescribeOperation(orphaned), orphaned.Operation)
			err := app.TryTerminate(t)
			require.ErrorContains(t, err, "No operation is in progress", "argocd-server refuses to terminate it")
			app.HardRefresh(t)
			refreshed := app.Get(t)
			require.Equal(t, synccommon.OperationRunning, phase(refreshed), "a hard refresh does not clear it: %s", testenv.DescribeOperation(refreshed))
			require.Nil(t, refreshed.Operation)
			r.Controller = fmt.Sprintf("after .operation was cleared and the Pod made Ready: operation %s for %s; Terminate: %q; hard refresh: still %s",
				testenv.DescribeOperation(refreshed), controllerWindow, firstLineOf(err.Error()), phase(refreshed))

			ops := stack.CountOperations(t, app.Name)
			d := startServeDaemon(t, app.RealHookApp, orphanPolicy)
			want := incident{rule: syncmedic.RuleOperationOrphaned, object: appObject(app.RealHookApp)}
			root := announcedAbout(t, d.slack, want.rule, want.object, announceWithin+orphanThreshold)
			require.Contains(t, root.Blocks, "No operation is in progress", "the message says why terminate does nothing")
			after, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
				return testenv.OperationCompleted(a) && !a.Status.OperationState.StartedAt.Equal(&started)
			})
			require.True(t, ok, "the remedy's sync replaces the orphaned state and the controller finishes it: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Eventually(t, func() bool { return resolved(d.slack, root) }, announceWithin, tick,
				"the incident resolves once the new sync finished: %s", d.slack.summary())
			waitFor(nearMissWindow/2, func() bool { return len(appliedRemedies(d.slack)) > 1 })
			terminations, syncs := ops.Counts()
			require.Zero(t, terminations, "nothing terminated")
			require.Equal(t, 1, syncs, "one sync")
			require.Len(t, appliedRemedies(d.slack), 1, "the remedy is applied once: %s", d.slack.summary())
			require.Len(t, d.slack.roots(), 1, "one incident: %s", d.slack.summary())
			onlyAnnounced(t, d.slack, want)
			r.Controller += "; after the remedy's Sync: " + testenv.DescribeOperation(after)
			r.Syncmedic = fmt.Sprintf("argocd/operation-orphaned announced about the Application; resync-orphaned applied once (%d sync, %d terminate); resolved once the new operation %s",
				syncs, terminations, phase(after))
		})
		t.Run("on "+version+" a sync waiting for health with its .operation set is not orphaned", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("sync waiting for the health of a Deployment, .operation set (serve auto, operation-orphaned %s)", orphanThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealHealthWait(t, stack, "not-orphaned")
			d := startServeDaemon(t, app.RealHookApp, orphanPolicy)
			from := d.logLen()
			window := max(nearMissWindow, orphanThreshold+15*time.Second)
			if waitFor(window, func() bool { return len(d.slack.roots()) > 0 }) {
				r.Syncmedic = "FALSE POSITIVE: " + d.slack.summary()
				t.Fatalf("nothing may be announced: %s", d.slack.summary())
			}
			n := d.lookedAt(t, app.RealHookApp, from, false)
			held := app.Get(t)
			require.NotNil(t, held.Operation, "the operation is the controller's: %s", testenv.DescribeOperation(held))
			require.Equal(t, synccommon.OperationRunning, phase(held), testenv.DescribeOperation(held))
			require.True(t, strings.HasPrefix(held.Status.OperationState.Message, testenv.HealthWaitMessage), testenv.DescribeOperation(held))
			r.Controller = fmt.Sprintf("operation %s with .operation set, past the threshold", testenv.DescribeOperation(held))
			r.Syncmedic = fmt.Sprintf("no finding for %s (operation-orphaned %s): evaluated %d times, nothing found", window, orphanThreshold, n)
			app.MakeReady(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok, "the sync moves on once the Pod is Ready: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			r.Controller += "; Pod made Ready: " + testenv.DescribeOperation(after)
		})
	}
}
