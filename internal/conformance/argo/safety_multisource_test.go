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

// Issue 26 item 3 on the real controller: an auto-synced Application with two sources whose auto-sync loses its TTL-0
// hook (v2.14.21: the fast-Job race); its operation carries the resolved revision of each source. syncmedic finds the
// lost hook (exact rule and Job) and, on auto, must not leave the application terminated: either its re-sync is
// accepted (a new operation starts) or it does not terminate. v3.6.1's argocd-server refuses a sync naming those
// revisions for an auto-synced app ("Cannot sync source … auto-sync currently set to main"); v2.14.21's check compares
// each source with itself (resolveSourceRevisions writes the requested revision into the slice GetSources returns, and
// reads it back from there), so on v2.14.21 the re-sync was accepted both before and after the fix (seen here): this
// is the near miss on v2.14.21, not the refusal, which needs a lost hook on v3.6.1 (the TTL-0 race does not lose it).
func TestAutoSyncedMultiSourceAppIsNotLeftTerminated(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	t.Run("on "+version+" terminate-and-resync of an auto-synced multi-source app either re-syncs or does not terminate", func(t *testing.T) {
		t.Parallel()
		r := row(version, "auto-synced multi-source app whose auto-sync lost its TTL-0 hook ("+safetyThresholds+")")
		stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
		record(t, r)
		app, stuck, finished := lostOnANewApp(t, func() *testenv.RealHookApp { return testenv.ScenarioRealAutoSyncedMultiSourceLostHook(t, stack) })
		r.Controller = fmt.Sprintf("auto-sync of revisions %v: %s", stuck.Status.OperationState.Operation.Sync.Revisions, testenv.DescribeOperation(stuck))
		require.False(t, finished, "v2.14.21 never sees the TTL-0 hook finish: %s", testenv.DescribeOperation(stuck))
		require.Equal(t, synccommon.OperationRunning, phase(stuck))
		require.Len(t, stuck.Status.OperationState.Operation.Sync.Revisions, 2, "the auto-sync names each source's revision")
		started := stuck.Status.OperationState.StartedAt

		ops := stack.CountOperations(t, app.Name)
		srv := startServe(t, app, safetyPolicy)
		root := incidentAbout(t, srv, app, syncmedic.RuleHookCompletionMissed, "clean-reports", announceWithin+15*time.Second)
		resynced := func(a *v1alpha1.Application) bool {
			st := a.Status.OperationState
			return st != nil && st.StartedAt.After(started.Time)
		}
		// Give the remedy its time: until a new operation starts, or the thread reports the remedy's end.
		after, _ := app.WaitApp(t, 2*remedyWithin, func(a *v1alpha1.Application) bool {
			return resynced(a) || len(threadResults(srv, root)) > 0
		})
		if !resynced(after) {
			after, _ = app.WaitApp(t, nearMissWindow, resynced)
		}
		terminations, syncs := ops.Counts()
		// The phase only, and the whole thread once the incident resolved: the new operation's message and the
		// thread's last reply depend on how far the controller and serve had got when they were read.
		r.Controller += "; after the remedy: " + string(phase(after))
		summary := thread(srv, root)
		if resynced(after) {
			r.Controller += " (a new operation)"
			summary = resolvedThread(t, srv, root)
		}
		r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed about Job clean-reports; thread: %s; terminations %d, new syncs %d",
			summary, terminations, syncs)
		if terminations > 0 {
			require.True(t, resynced(after), "terminated, so the re-sync must have been accepted: %s; Slack: %s",
				testenv.DescribeOperation(after), srv.summary())
		} else {
			require.Equal(t, synccommon.OperationRunning, phase(after), "not terminated: the operation still runs")
			require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "not terminated: the same operation")
		}
	})
}

// lostOnANewApp runs scenario, whose first operation must lose its TTL-0 hook on v2.14.21, and waits controllerWindow
// for that operation to complete. On the real node the application-controller, resumed by the race loser, can still
// replay the hook Job's completion from the watch events it queued while paused, before the deletion, and finish the
// sync (it did once in a full run): the scenario is then run again on a new app, at most three times in all, as
// testenv.ScenarioRealSlowAndFastWave does. It returns the app, its operation and whether it completed.
func lostOnANewApp(t *testing.T, scenario func() *testenv.RealHookApp) (*testenv.RealHookApp, *v1alpha1.Application, bool) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		app := scenario()
		stuck, finished := app.WaitApp(t, controllerWindow, testenv.OperationCompleted)
		if !finished || attempt == 3 {
			return app, stuck, finished
		}
		t.Logf("attempt %d: the resumed controller saw the lost hook finish after all (%s); again on a new app", attempt, testenv.DescribeOperation(stuck))
	}
}

// threadResults returns the replies in root's thread that report a remedy's result or why it was not applied.
func threadResults(srv *fakeSlack, root slackMessage) []string {
	var out []string
	for _, reply := range srv.replies(root.TS) {
		if strings.HasPrefix(reply, ":white_check_mark:") || strings.HasPrefix(reply, ":x:") {
			out = append(out, reply)
		}
	}
	return out
}
