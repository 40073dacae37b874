package argo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// retryBackoff is the wait between the two attempts of TestRetryBackoffIsNotALostHook: twice hook-completion-missed's
// threshold in retryPolicy, so a rule that counts from the failed attempt's hook fires well inside the backoff.
const retryBackoff = 90 * time.Second

// retryPolicy is safetyPolicy with hook-completion-missed at 45 s: at least the 30 s serve warns below (the controller
// can take that long to notice a finished hook), so the retry's own attempt is judged at the controller's real pace —
// at 15 s, v2.14.21's retry (BeforeHookCreation deletes and re-creates the hook) was reported 15 s after it started,
// before the controller had looked at the new hook.
const retryPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
  argocd/hook-completion-missed: {mode: auto, threshold: 45s, rerunHooks: true}
` + routes

// retryThresholds is the row text naming retryPolicy's thresholds.
const retryThresholds = "serve on auto: hook-finalizer-stuck 3s, hook-completion-missed 45s"

// Issue 26 item 6 on the real controllers: a sync with a retry strategy (limit 1, backoff 90 s, factor 1) whose Sync
// wave fails to apply a ConfigMap (its namespace does not exist) while the wave's hook Job runs. Between the attempts
// the controller keeps the operation Running with finishedAt set, retryCount 1 and the failed attempt's sync result;
// on v2.14.21 that result still records the hook Running (gitops-engine failed the wave as soon as the apply failed),
// though the Job finished seconds later: the shape of a lost hook, for far longer than hook-completion-missed's
// threshold. The person fixing the cause creates the namespace during the backoff. Nothing may be reported or done
// during the backoff — terminating would cut it short and reset the retry count — and the controller's own retry
// then succeeds, the same operation. v3.6.1 waits for the running hook before failing the wave, so its backoff
// records the hook finished: the same near miss, from a different state. v2.14.21's retry then loses its hook for
// good (retryLosesItsHook), and only there may syncmedic act.
func TestRetryBackoffIsNotALostHook(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" an operation backing off before its retry is neither reported nor touched", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("retry backoff after a Sync wave failed to apply beside its hook (retry limit 1, backoff %s, factor 1; %s)",
				retryBackoff, retryThresholds))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, _ := testenv.ScenarioRealRetryingWave(t, stack, retryBackoff)
			backing := app.Get(t)
			started := backing.Status.OperationState.StartedAt
			r.Controller = fmt.Sprintf("between the attempts: %s (retryCount %d, finishedAt set)", testenv.DescribeOperation(backing),
				backing.Status.OperationState.RetryCount)
			if version == testenv.ArgoCDV2 {
				require.Equal(t, synccommon.OperationRunning, testenv.HookResult(backing, testenv.KeptWaveHook.Name),
					"v2.14.21 keeps the failed attempt's result, the hook recorded Running: %s", testenv.DescribeOperation(backing))
			}
			ops := stack.CountOperations(t, app.Name)
			srv := startServe(t, app, retryPolicy)
			app.CreateMissingNamespace(t)

			// Watch the whole backoff: the retry starts when the controller clears finishedAt.
			var reported bool
			retried, ok := app.WaitApp(t, retryBackoff+remedyWithin, func(a *v1alpha1.Application) bool {
				reported = reported || len(srv.roots()) > 0
				return !testenv.Retrying(a)
			})
			reported = reported || len(srv.roots()) > 0
			terminations, syncs := ops.Counts()
			applied := len(appliedRemedies(srv))
			require.True(t, ok, "the controller retries after the backoff: %s", testenv.DescribeOperation(retried))
			r.Controller += "; namespace created during the backoff; the controller's retry started"
			r.Syncmedic = fmt.Sprintf("during the backoff: %d incident(s) [%s]; remedies applied: %d; terminations %d, new syncs %d",
				len(srv.roots()), srv.summary(), applied, terminations, syncs)
			require.False(t, reported, "nothing is reported during the backoff: %s", srv.summary())
			require.Zero(t, applied, "nothing is done during the backoff")
			require.Zero(t, terminations, "the retrying operation is not terminated during the backoff")
			require.Zero(t, syncs, "syncmedic starts no sync of its own during the backoff")
			if version == testenv.ArgoCDV2 {
				retryLosesItsHook(t, r, app, srv, ops, started)
				return
			}
			after, done := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
			terminations, syncs = ops.Counts()
			r.Controller += fmt.Sprintf(": %s (retryCount %d)", testenv.DescribeOperation(after), after.Status.OperationState.RetryCount)
			require.Empty(t, appliedRemedies(srv), "nothing is done to the retry")
			require.Zero(t, terminations, "the retry is not terminated")
			require.Zero(t, syncs, "syncmedic starts no sync of its own")
			r.Syncmedic = fmt.Sprintf("no finding, no action during the %s backoff; the controller's retry succeeded", retryBackoff)
			require.True(t, done, "the retry ends: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "the same operation, retried by the controller")
			require.EqualValues(t, 1, after.Status.OperationState.RetryCount, "one retry, the count not reset")
			require.Empty(t, srv.roots(), "a sync that succeeded is not reported: %s", srv.summary())
		})
	}
}

// retryLosesItsHook is TestRetryBackoffIsNotALostHook's retry attempt on v2.14.21, which loses its hook for good. The
// controller clears the sync result only in memory when the retry starts (appcontroller.go:1408-1413); the retry's
// first pass deletes the failed attempt's Job (BeforeHookCreation: gitops-engine c08b0a72 sync_context.go runTasks)
// and records no resource, and setOperationState's merge patch leaves out the empty list (`resources,omitempty`), so
// the failed attempt's results stay stored. The next pass reads Job report back as Running, records it "Pending
// deletion" from the deleting Job and, once the Job is gone, waits for a running hook that has no live object and
// that nothing will create again: for ever (argo-cd #16446, #27507; a diagnostic run with serve only notifying saw
// the operation unchanged for 5 minutes). The Pod's exit is not what holds it: the Job is gone within seconds. That
// is the lost hook hook-completion-missed exists for: reported once the operation has not changed for the threshold,
// and terminate-and-resync's new sync, which creates the hook again, succeeds.
func retryLosesItsHook(t *testing.T, r *conformance.Row, app *testenv.RealHookApp, srv *fakeSlack, ops *testenv.OperationCounter, started metav1.Time) {
	t.Helper()
	lost, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool { return retryLostHook(t, app, a, started) })
	require.True(t, ok, "v2.14.21's retry waits for hook %s, which no longer exists: %s", testenv.KeptWaveHook.Name, testenv.DescribeOperation(lost))
	lostAt := time.Now()
	// Only what retryLostHook holds goes into the row: the operation's message is whichever pass wrote last ("one or
	// more tasks are running" from the pass that deleted the Job, "waiting for completion of hook ..." from a later one).
	r.Controller += fmt.Sprintf("; the retry deleted the old Job (BeforeHookCreation) and waits for it: operation %s, retryCount %d, hook %s recorded %s from the failed attempt, Job %[3]s absent",
		phase(lost), lost.Status.OperationState.RetryCount, testenv.KeptWaveHook.Name, testenv.HookResult(lost, testenv.KeptWaveHook.Name))
	t.Logf("the lost retry's operation: %s", testenv.DescribeOperation(lost))

	// The controller leaves the lost hook as it is until syncmedic acts.
	var changed bool
	app.WaitApp(t, retryPolicyHookCompletion+announceWithin, func(a *v1alpha1.Application) bool {
		announced := len(incidentsOf(srv, syncmedic.RuleHookCompletionMissed)) > 0
		changed = changed || (!announced && !retryLostHook(t, app, a, started))
		return announced
	})
	root := incidentAbout(t, srv, app, syncmedic.RuleHookCompletionMissed, testenv.KeptWaveHook.Name, time.Second)
	waited := time.Since(lostAt).Round(time.Second)
	require.False(t, changed, "the controller did nothing about the lost hook by itself until serve acted")
	require.GreaterOrEqual(t, waited, retryPolicyHookCompletion-5*time.Second, "reported only past the threshold")

	resynced := func(a *v1alpha1.Application) bool {
		return testenv.OperationCompleted(a) && a.Status.OperationState.StartedAt.After(started.Time)
	}
	after, done := app.WaitApp(t, 2*remedyWithin, resynced)
	terminations, syncs := ops.Counts()
	r.Controller += "; after the remedy: " + testenv.DescribeOperation(after)
	r.Syncmedic = fmt.Sprintf("no finding, no action during the %s backoff; argocd/hook-completion-missed about Job %s once the retry had lost it for the threshold (waited %s); thread: %s; terminations %d, new syncs %d",
		retryBackoff, testenv.KeptWaveHook.Name, waited, resolvedThread(t, srv, root), terminations, syncs)
	require.Len(t, srv.roots(), 1, "only the lost hook is reported: %s", srv.summary())
	require.Equal(t, 1, terminations, "the lost retry is terminated once")
	require.Equal(t, 1, syncs, "and synced again once")
	require.True(t, done, "the new sync ends: %s", testenv.DescribeOperation(after))
	require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
}

// retryPolicyHookCompletion is hook-completion-missed's threshold in retryPolicy.
const retryPolicyHookCompletion = 45 * time.Second

// retryLostHook holds while a's operation is the retry of the operation started at started (Running, finishedAt
// cleared, retryCount 1) recording Job report Running though the Job no longer exists.
func retryLostHook(t *testing.T, app *testenv.RealHookApp, a *v1alpha1.Application, started metav1.Time) bool {
	st := a.Status.OperationState
	if st == nil || st.Phase != synccommon.OperationRunning || st.FinishedAt != nil || st.RetryCount != 1 || !st.StartedAt.Equal(&started) {
		return false
	}
	if testenv.HookResult(a, testenv.KeptWaveHook.Name) != synccommon.OperationRunning {
		return false
	}
	job, _ := app.JobState(t, testenv.KeptWaveHook.Name)
	return job == nil
}
