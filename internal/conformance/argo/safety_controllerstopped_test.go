package argo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// The stacks of these tests reconcile every 10 s (timeout.reconciliation and --app-resync 10, no jitter), so a
// healthy controller reconciles an app at least every 20 s (2 x timeout + jitter: rules.DefaultControllerNotProcessing
// says why). notProcessingThreshold is the bound for that period as the default is for Argo CD's: three periods and
// 30 s of margin. The controller is stopped until serve has announced the app as not processing and the hook has been
// finished for hookCompletionThreshold and stoppedQuiet more (about 90 s in all), instead of the 7 minutes the
// default bound would need; the point is the same: serve sees the hook finished while the controller is away.
const (
	notProcessingThreshold  = 60 * time.Second
	hookCompletionThreshold = 30 * time.Second
	stoppedQuiet            = 20 * time.Second
)

// stoppedPolicy is the policy of the issue 45 report: hook-completion-missed on auto with rerunHooks, 30 s.
var stoppedPolicy = fmt.Sprintf(`resolveAfter: 1
rules:
  argocd/hook-completion-missed: {mode: auto, rerunHooks: true, threshold: %s}
  argocd/controller-not-processing: {mode: notify, threshold: %s}
`, hookCompletionThreshold, notProcessingThreshold) + routes

// Issue 45 item 1 on the real controllers: a PreSync hook Job runs, the application-controller process is stopped
// (SIGSTOP) while the hook finishes, and started again. argocd-server keeps answering, and GetResource shows the hook
// Job Complete; before this change serve terminated the operation (hook-completion-missed after 30 s) and, once the
// controller was back, the sync ended "Operation terminated" instead of Succeeded. Now serve announces only
// argocd/controller-not-processing about the Application (status.reconciledAt stopped moving), sends no
// TerminateOperation and no Sync, and the controller finishes the same operation: Succeeded.
func TestControllerStoppedWhileTheHookFinishesIsNotTerminated(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a sync whose hook finished while the application-controller was stopped is left to finish", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("PreSync hook Job finishing while the application-controller is stopped (SIGSTOP) past the bound, then continued (serve auto: hook-completion-missed %s, rerunHooks; controller-not-processing %s; reconciliation 10s)",
				hookCompletionThreshold, notProcessingThreshold))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version, Own: true})
			record(t, r)
			app, _ := testenv.ScenarioRealHookRunning(t, stack, "ctl-stopped", testenv.RealHook{Name: "migrate", Run: testenv.PodRunsUntilReleased})
			running := app.Get(t)
			started := running.Status.OperationState.StartedAt
			ops := stack.CountOperations(t, app.Name)
			d := startServeDaemon(t, app, stoppedPolicy)

			resume := stack.PauseController(t)
			stoppedAt := time.Now()
			app.Release(t, "migrate")
			var finishedAt time.Time
			require.Eventually(t, func() bool {
				job, _ := app.JobState(t, "migrate")
				at, done := jobFinished(job)
				finishedAt = at
				return done
			}, 2*time.Minute, tick, "the hook Job completes while the controller is stopped")
			want := incident{rule: syncmedic.RuleControllerNotProcessing, object: appObject(app)}
			root := announcedAbout(t, d.slack, want.rule, want.object, notProcessingThreshold+announceWithin)
			require.Contains(t, root.Blocks, "is not processing", "the message says what is stuck")
			require.Contains(t, root.Blocks, "status.reconciledAt", "the evidence is the controller's own")
			// Past the hook-completion threshold counted from the hook's end, and a quiet window more: serve saw the
			// hook finished all along, and must not act.
			waitFor(time.Until(finishedAt.Add(hookCompletionThreshold+stoppedQuiet)), func() bool {
				terminations, _ := ops.Counts()
				return terminations > 0
			})
			held := app.Get(t)
			require.Equal(t, synccommon.OperationRunning, phase(held), "still Running while the controller is stopped: %s", testenv.DescribeOperation(held))
			// The row records relations, not measured durations (they vary from run to run), each asserted here.
			stoppedFor, bound := time.Since(stoppedAt), hookCompletionThreshold+stoppedQuiet
			require.GreaterOrEqual(t, stoppedFor, bound, "stopped past the hook-completion threshold and the quiet window")
			require.True(t, finishedAt.After(stoppedAt), "the hook Job completed while the controller was stopped")
			require.True(t, reconciledAtOf(held).Before(finishedAt), "the controller's last reconciliation (%s) is before the hook's end (%s)", reconciledAtOf(held), finishedAt)
			r.Controller = fmt.Sprintf("stopped ≥ %s (the hook-completion threshold and %s quiet after the hook's end); hook Job Complete while stopped; "+
				"reconciledAt before the hook's end; operation meanwhile: %s", bound, stoppedQuiet, testenv.DescribeOperation(held))
			resume()

			after, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool { return testenv.OperationCompleted(a) })
			require.True(t, ok, "the controller finishes the operation once it is back: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "the same operation, not a new sync: %s", testenv.DescribeOperation(after))
			require.Eventually(t, func() bool { return resolved(d.slack, root) }, announceWithin, tick,
				"the incident resolves once the controller reconciles the app again: %s", d.slack.summary())
			waitFor(nearMissWindow/2, func() bool { t, s := ops.Counts(); return t+s > 0 })
			terminations, syncs := ops.Counts()
			require.Zero(t, terminations, "no TerminateOperation: %s", d.slack.summary())
			require.Zero(t, syncs, "no new Sync: %s", d.slack.summary())
			require.Empty(t, appliedRemedies(d.slack), "no remedy applied: %s", d.slack.summary())
			require.Len(t, d.slack.roots(), 1, "one incident: %s", d.slack.summary())
			onlyAnnounced(t, d.slack, want)
			r.Controller += "; continued: " + testenv.DescribeOperation(after)
			r.Syncmedic = fmt.Sprintf("argocd/controller-not-processing announced about the Application while stopped (evidence status.reconciledAt), nothing else; %d terminate, %d sync; resolved once the controller reconciled again",
				terminations, syncs)
		})
	}
}

// jobFinished reports whether job has its Complete or Failed condition, and since when.
func jobFinished(job *batchv1.Job) (time.Time, bool) {
	if job == nil {
		return time.Time{}, false
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// reconciledAtOf is the application's status.reconciledAt (zero when never reconciled).
func reconciledAtOf(app *v1alpha1.Application) time.Time {
	if app.Status.ReconciledAt == nil {
		return time.Time{}
	}
	return app.Status.ReconciledAt.Time
}
