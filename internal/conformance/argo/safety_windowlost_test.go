package argo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// lostHookWindowQuiet is how long TestLostHookIsNotTerminatedUnderADenyWindow keeps the deny window open with serve
// running: three times safetyPolicy's hook-completion-missed threshold.
const lostHookWindowQuiet = 45 * time.Second

// Issue 26 item 2, third bullet, on the real v3.0.12 and v2.14.21 controllers: there, a sync window blocks the
// termination of a running operation too (the controller checks the window before it looks at a terminate request;
// argo-cd #25361, #20799, only v3.6 exempts Terminating), so a TerminateOperation during a plain deny window leaves the
// operation Terminating until the window ends. A PreSync wave loses its fast hook: the controller is paused (SIGSTOP)
// while the fast hook's Pod exits and the real TTL controller deletes the Job (on v3.0.12 the hook finalizer holds
// it until the test, playing a person, removes the finalizer), then the slow hook ends: the operation waits forever
// for a hook that is gone (when the resumed controller still sees the hook finish, another app is tried:
// waveWaitingForALostHook). A plain deny window (not manualSync) then opens, and serve starts with
// hook-completion-missed on auto: while the window holds the operation ("Sync operation blocked by sync window"),
// serve evaluates the application, reports nothing and never terminates (no Terminating seen on the Application).
// Once the window is gone, the lost hook is reported and the remedy terminates and syncs again, once.
// TestSyncWindowHoldsTheTerminateOfALostHook is the manualSync window's case (v2.14.21), where the controller goes on
// and only syncmedic's unattended-window check holds the remedy.
func TestLostHookIsNotTerminatedUnderADenyWindow(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV3Leaky, testenv.ArgoCDV2} {
		t.Run("on "+version+" a lost hook under a deny window is not terminated until the window closes", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("lost fast hook, then a deny sync window (not manualSync) held open %s (%s)", lostHookWindowQuiet, safetyThresholds))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, stuck := waveWaitingForALostHook(t, stack)
			started := stuck.Status.OperationState.StartedAt

			setDenyWindow(t, stack, app.Name, true)
			blocked, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
				return a.Status.OperationState != nil && strings.Contains(a.Status.OperationState.Message, "blocked by sync window")
			})
			require.True(t, ok, "the controller pauses the operation: %s", testenv.DescribeOperation(blocked))
			r.Controller = fmt.Sprintf("fast hook lost (controller paused while it finished and went): %s; deny window opened: %s",
				testenv.DescribeOperation(stuck), testenv.DescribeOperation(blocked))

			ops := stack.CountOperations(t, app.Name)
			d := startServeDaemon(t, app, safetyPolicy)
			from := d.logLen()
			fired := waitFor(lostHookWindowQuiet, func() bool { return len(d.slack.roots()) > 0 })
			held := app.Get(t)
			terminations, syncs := ops.Counts()
			r.Syncmedic = fmt.Sprintf("while the window was open (%s): %d incident(s) [%s], remedies applied [%s], terminations seen %d",
				lostHookWindowQuiet, len(d.slack.roots()), d.slack.summary(), strings.Join(appliedRemedies(d.slack), " / "), terminations)
			require.False(t, fired, "nothing is reported while the window holds the operation: %s", d.slack.summary())
			require.Zero(t, terminations, "serve never asks to terminate under the window")
			require.Zero(t, syncs, "nor to sync")
			require.Empty(t, appliedRemedies(d.slack))
			require.Equal(t, synccommon.OperationRunning, phase(held), "not Terminating: %s", testenv.DescribeOperation(held))
			require.True(t, held.Status.OperationState.StartedAt.Equal(&started), "the same operation")
			n := d.lookedAt(t, app, from, true)
			r.Syncmedic = fmt.Sprintf("while the window was open (%s): evaluated %d times with the hooks read, nothing reported, no terminate (the operation stayed Running)", lostHookWindowQuiet, n)

			setDenyWindow(t, stack, app.Name, false)
			lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "fast")}
			root := announcedAbout(t, d.slack, lost.rule, lost.object, announceWithin+30*time.Second)
			moved, ok := app.WaitApp(t, 2*remedyWithin, func(a *v1alpha1.Application) bool {
				op := a.Status.OperationState
				return op != nil && op.StartedAt.After(started.Time)
			})
			require.True(t, ok, "once the window is gone the remedy terminates and syncs again: %s", testenv.DescribeOperation(moved))
			terminations, syncs = ops.Counts()
			// The new operation's phase only: its message is whatever its first pass had written when it was read.
			r.Syncmedic += fmt.Sprintf("; once the window closed: %s announced, then terminated (%d) and synced again (%d): %s",
				lost, terminations, syncs, phase(moved))
			r.Controller += "; once the window closed: " + resolvedThread(t, d.slack, root)
			require.Equal(t, 1, terminations, "terminated once")
			onlyAnnounced(t, d.slack, lost)
		})
	}
}

// lostHookAttempts bounds waveWaitingForALostHook's attempts.
const lostHookAttempts = 3

// waveWaitingForALostHook runs ScenarioRealWindowedWave, loses its fast hook (loseFastHook) and releases the slow one,
// and returns the app once the controller has recorded the slow hook's end while the operation still waits for the
// fast one. On resume the controller's informer may still deliver the Job's last states before its deletion (seen on
// v3.0.12: the controller then records the fast hook Succeeded and the sync ends): that wave is not the state under
// test, and another app is tried.
func waveWaitingForALostHook(t *testing.T, stack *testenv.RealArgoCD) (*testenv.RealHookApp, *v1alpha1.Application) {
	t.Helper()
	for attempt := 1; attempt <= lostHookAttempts; attempt++ {
		app := testenv.ScenarioRealWindowedWave(t, stack)
		loseFastHook(t, stack, app)
		app.Release(t, "slow")
		stuck, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			return testenv.HookResult(a, "slow") == synccommon.OperationSucceeded
		})
		require.True(t, ok, "the controller records the slow hook's end: %s", testenv.DescribeOperation(stuck))
		if phase(stuck) == synccommon.OperationRunning && testenv.HookResult(stuck, "fast") == synccommon.OperationRunning {
			return app, stuck
		}
		require.Equal(t, synccommon.OperationSucceeded, testenv.HookResult(stuck, "fast"), testenv.DescribeOperation(stuck))
		t.Logf("attempt %d: the controller saw the fast hook finish after all: %s", attempt, testenv.DescribeOperation(stuck))
	}
	t.Fatalf("in %d attempts the controller always saw the fast hook finish", lostHookAttempts)
	return nil, nil
}

// loseFastHook makes ScenarioRealWindowedWave's fast hook finish unseen: with the controller paused (SIGSTOP), its
// Pod exits and the real TTL controller deletes the Job; where the hook finalizer holds it (v3), the test removes the
// finalizer as a person does, and the Job goes. The controller then resumes with the hook still recorded Running.
func loseFastHook(t *testing.T, stack *testenv.RealArgoCD, app *testenv.RealHookApp) {
	t.Helper()
	resume := stack.PauseController(t)
	defer resume()
	app.Release(t, "fast")
	require.True(t, app.WaitJob(t, "fast", controllerWindow, func(j *batchv1.Job) bool { return j == nil || j.DeletionTimestamp != nil }),
		"the TTL controller deletes the finished fast Job")
	// Read afresh on every attempt: the garbage collector may remove foregroundDeletion meanwhile, and the apiserver
	// refuses to put it back on a deleting Job.
	app.RemoveHookFinalizer(t, "fast")
	require.True(t, app.WaitJob(t, "fast", controllerWindow, func(j *batchv1.Job) bool { return j == nil }), "the fast Job is gone")
}
