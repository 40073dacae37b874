package argo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
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
// records the hook finished: the same near miss, from a different state.
func TestRetryBackoffIsNotALostHook(t *testing.T) {
	t.Parallel()
	env := testenv.KubeWithControllers(t)
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
				// What the backoff asks is proven here. The retry attempt itself is not judged on v2.14.21: with
				// hook-completion-missed at 45 s, serve reported its hook "not found" 45 s after the retry started
				// with no change of the operation state meanwhile (BeforeHookCreation deletes the failed attempt's
				// Job and creates it again), and terminated it. Whether that attempt was really lost, or the
				// played kubelet's Pods keep the old Job from going, is not established yet (issue 26's note).
				r.Syncmedic = fmt.Sprintf("no finding, no action during the %s backoff; the retry attempt's outcome is not asserted on this version", retryBackoff)
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
