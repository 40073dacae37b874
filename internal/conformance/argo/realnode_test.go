package argo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// unattendedPolicy acts on the hook rules automatically but does not let a remedy re-run hooks (no rerunHooks):
// argocd/terminate-and-resync, which starts a new sync running every hook again, is only proposed.
const unattendedPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
  argocd/hook-completion-missed: {mode: auto, threshold: 5s}
` + routes

// unattendedThresholds says unattendedPolicy in the words of a conformance row.
const unattendedThresholds = "auto without rerunHooks: hook-finalizer-stuck 3s, hook-completion-missed 5s after the hook finished, operation-stuck 30m"

// unattendedWatch is how long the test keeps watching after the announcement for a remedy that must not come:
// serve re-evaluates every second (--argocd-live-resync 1s).
const unattendedWatch = 20 * time.Second

// A migration must never run twice unattended, asserted on the real node's count of its container's starts: a
// PreSync hook "db-migrate" (ttlSecondsAfterFinished: 0) appends a line to a file on a hostPath volume each time its
// container starts. It loses the fast-Job race the way TestFastHookJobWithTTLZero forces it (the controller paused
// while the Job completes and the TTL controller deletes it). syncmedic serve runs on auto without rerunHooks.
// v2.14.21's operation waits for the lost hook forever: argocd/hook-completion-missed is announced about the Job
// with terminate-and-resync proposed, never applied; the operation is left as it is and the migration ran once.
// v3.6.1's hook finalizer holds the Job until the controller saw it finish: the sync succeeds, nothing is reported,
// and the migration ran once.
func TestALostMigrationHookNeverRunsTwiceUnattended(t *testing.T) {
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		v2 := version == testenv.ArgoCDV2
		name := "on " + version + " a lost migration hook is reported, its re-run only proposed, and it ran once"
		if !v2 {
			name = "on " + version + " a migration hook held by the hook finalizer finishes its sync, nothing reported, and it ran once"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := row(version, "migration hook (PreSync, ttlSecondsAfterFinished: 0) TTL-deleted while the controller does not look (paused), serve on auto without rerunHooks")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			race := fastHookRace(t, stack, "migration", "db-migrate", v2)
			app, got, finished := race.app, race.got, race.finished
			if !v2 {
				require.NotNil(t, race.held, "v3's hook finalizer keeps the TTL-deleted Job until the controller saw it")
				require.Contains(t, race.held.Finalizers, testenv.HookFinalizer, race.heldDesc)
			}
			_, job := app.JobState(t, "db-migrate")
			r.Controller = fmt.Sprintf("%s after the controller resumed: operation %s; hook Job %s", controllerWindow,
				testenv.DescribeOperation(got), job)

			if !v2 {
				require.True(t, finished, "v3.6.1 finishes the sync: %s", testenv.DescribeOperation(got))
				require.Equal(t, synccommon.OperationSucceeded, phase(got), testenv.DescribeOperation(got))
				d := startServeDaemon(t, app, unattendedPolicy)
				require.False(t, nearMiss(t, d, app, r, unattendedThresholds, false), "a finished sync is not reported: %s", d.slack.summary())
				runs := app.Runs(t, "db-migrate")
				r.Syncmedic += fmt.Sprintf("; the node ran the migration's container %d time(s)", runs)
				require.Equal(t, 1, runs, "the migration ran once on the node")
				return
			}
			require.False(t, finished, "v2.14.21 never sees the deleted hook finish: %s", testenv.DescribeOperation(got))
			require.Equal(t, synccommon.OperationRunning, phase(got), "the operation is waiting: %s", testenv.DescribeOperation(got))
			require.Contains(t, got.Status.OperationState.Message, "db-migrate")
			startedAt := got.Status.OperationState.StartedAt

			srv := startServe(t, app, unattendedPolicy)
			lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "db-migrate")}
			root := announcedAbout(t, srv, lost.rule, lost.object, announceWithin)
			time.Sleep(unattendedWatch)
			after := app.Get(t)
			runs := app.Runs(t, "db-migrate")
			r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed announced about the hook Job db-migrate, nothing else; %s later: %d remedy applied, operation %s; the node ran the migration's container %d time(s)",
				unattendedWatch, len(remediesApplied(srv)), testenv.DescribeOperation(after), runs)
			require.Equal(t, 1, runs, "the migration ran exactly once on the node")
			require.Empty(t, remediesApplied(srv), "no remedy re-runs the hooks without rerunHooks: %s", srv.summary())
			require.Equal(t, synccommon.OperationRunning, phase(after), "the operation is left as it was: %s", testenv.DescribeOperation(after))
			require.Equal(t, startedAt, after.Status.OperationState.StartedAt, "no new operation started")
			onlyAnnounced(t, srv, lost)
			require.Contains(t, root.Text+root.Blocks, "set rerunHooks: true",
				"the announcement says why the remedy is only proposed: %s", srv.summary())
			r.Syncmedic += "; terminate-and-resync proposed (rerunHooks not set), not applied"
		})
	}
}

// fastHookRaceTry is what one try of fastHookRace saw.
type fastHookRaceTry struct {
	app      *testenv.RealHookApp
	start    time.Time
	held     *batchv1.Job // the hook Job once the TTL controller had deleted it (nil: already gone)
	heldDesc string
	got      *v1alpha1.Application // the application controllerWindow after the controller resumed
	finished bool                  // whether its operation completed meanwhile
}

// fastHookRace runs the fast-Job race on the real node: a PreSync hook Job hook (ttlSecondsAfterFinished: 0) of a
// new app name waits for its release file; the test pauses the application-controller (SIGSTOP), releases the
// container, waits until the TTL controller deleted the Job (on v2, until it is gone; v3's hook finalizer holds
// it), resumes the controller and waits controllerWindow for the operation. The resumed controller reads the Job's
// watch events that queued while it was stopped, completion then deletion, and now and then reaches the hook
// between the two: it saw the hook finish after all. On v2, where the test needs the lost hook, such a try is
// logged and the race run again on a new app, at most lostHookAttempts times (the last try is returned as it is,
// for the caller's assertions to report).
func fastHookRace(t *testing.T, stack *testenv.RealArgoCD, name, hook string, v2 bool) fastHookRaceTry {
	t.Helper()
	for attempt := 1; ; attempt++ {
		app, start := testenv.ScenarioRealHookRunning(t, stack, name, testenv.RealHook{Name: hook,
			Hook: synccommon.HookTypePreSync, TTL: testenv.TTL(0), Run: testenv.PodRunsUntilReleased})
		resume := stack.PauseController(t)
		app.Release(t, hook)
		deleted := app.WaitJob(t, hook, controllerWindow, func(j *batchv1.Job) bool { return j == nil || j.DeletionTimestamp != nil })
		held, desc := app.JobState(t, hook)
		// The TTL controller deletes in the foreground: for a moment the Job is still there, deleting, while its Pod
		// goes. On v2 the controller stays paused until it is gone.
		gone := !v2 || app.WaitJob(t, hook, controllerWindow, func(j *batchv1.Job) bool { return j == nil })
		resume()
		require.True(t, deleted && gone, "the TTL controller deletes the completed hook Job while the controller is paused: %s", desc)
		got, finished := app.WaitApp(t, controllerWindow, completedSince(start))
		try := fastHookRaceTry{app: app, start: start, held: held, heldDesc: desc, got: got, finished: finished}
		if !v2 || !finished || attempt == lostHookAttempts {
			return try
		}
		t.Logf("attempt %d: the resumed controller replayed the hook Job's completion before its deletion and saw it finish: %s", attempt, testenv.DescribeOperation(got))
	}
}
