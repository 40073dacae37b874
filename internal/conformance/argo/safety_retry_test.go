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

// retryBackoff is the wait between the two attempts of TestRetryBackoffIsNotALostHook: five times
// hook-completion-missed's threshold in safetyPolicy.
const retryBackoff = 75 * time.Second

// Issue 26 item 6 on the real controllers: a sync with a retry strategy (limit 1, backoff 75 s, factor 1) whose Sync
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
				retryBackoff, safetyThresholds))
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
			srv := startServe(t, app, safetyPolicy)
			app.CreateMissingNamespace(t)

			// Watch the whole backoff: the retry starts when the controller clears finishedAt.
			var reported bool
			retried, ok := app.WaitApp(t, retryBackoff+remedyWithin, func(a *v1alpha1.Application) bool {
				reported = reported || len(srv.roots()) > 0
				return !testenv.Retrying(a)
			})
			reported = reported || len(srv.roots()) > 0
			after, done := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
			terminations, syncs := ops.Counts()
			r.Controller += fmt.Sprintf("; namespace created during the backoff; then: %s (retryCount %d)",
				testenv.DescribeOperation(after), after.Status.OperationState.RetryCount)
			r.Syncmedic = fmt.Sprintf("during the backoff: %d incident(s) [%s]; remedies applied: %d; terminations %d, new syncs %d",
				len(srv.roots()), srv.summary(), len(appliedRemedies(srv)), terminations, syncs)
			if !reported && terminations == 0 && syncs == 0 {
				r.Syncmedic = fmt.Sprintf("no finding, no action during the %s backoff; the controller's retry succeeded", retryBackoff)
			}
			require.True(t, ok, "the controller retries after the backoff: %s", testenv.DescribeOperation(retried))
			require.False(t, reported, "nothing is reported during the backoff: %s", srv.summary())
			require.Empty(t, appliedRemedies(srv), "nothing is done during the backoff")
			require.Zero(t, terminations, "the retrying operation is not terminated")
			require.Zero(t, syncs, "syncmedic starts no sync of its own")
			require.True(t, done, "the retry ends: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "the same operation, retried by the controller")
			require.EqualValues(t, 1, after.Status.OperationState.RetryCount, "one retry, the count not reset")
			require.Empty(t, srv.roots(), "a sync that succeeded is not reported: %s", srv.summary())
		})
	}
}
