package argo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// noOperationWithin bounds how long terminate-and-resync may take to give up on an orphaned operation state: far
// below its 5-minute wait for the operation to stop (StopTimeout), which ffc7976 waited out on every attempt.
const noOperationWithin = 30 * time.Second

// Issue 26 item 9 on the real v2.14.21 controller and argocd-server: argocd-server answers TerminateOperation with
// "No operation is in progress" when the Application's .operation is empty, even while status.operationState still
// says Running — the "stuck Syncing, terminate does nothing" state (argo-cd #17155, #18613, #23765). No controller
// of the versions here reaches it: the application-controller clears .operation only in the patch that records a
// completed phase (v2.14.21 controller/appcontroller.go:1507-1520, setOperationState), and argocd-server only sets it.
// People do: clearing .operation by hand is the workaround passed around in those issues. So the test plays that
// person, on a real stuck operation: v2.14.21 loses a TTL-deleted fast hook beside a slow one and waits forever; the
// test then clears .operation through the Kubernetes API (the one hand-written write here), and the controller,
// which processes only an operation .operation holds, leaves the state Running. serve on auto reports the lost hook
// (argocd/hook-completion-missed) and its terminate-and-resync stops at once, saying why in the thread, instead of
// waiting 5 minutes for a stop that never comes (ffc7976 read the answer as "already stopped"); nothing is
// terminated or synced, and the remedy is not repeated.
func TestTerminateStopsAtOnceOnAnOrphanedOperationState(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	r := row(version, "lost hook whose operation state stays Running after .operation was cleared by hand (argo-cd #17155 workaround, played); "+safetyThresholds)
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	record(t, r)
	app := testenv.ScenarioRealSlowAndFastWave(t, stack)
	app.Release(t, "slow")
	require.True(t, app.WaitJob(t, "slow", controllerWindow, func(j *batchv1.Job) bool {
		_, desc := app.JobState(t, "slow")
		return j == nil || strings.HasPrefix(desc, "Complete")
	}), "the slow hook completes")
	stuck, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
		return testenv.HookResult(a, "slow") == synccommon.OperationSucceeded
	})
	require.True(t, ok, "the controller records the slow hook's end: %s", testenv.DescribeOperation(stuck))
	require.Equal(t, synccommon.OperationRunning, phase(stuck), "v2.14.21 waits for the lost fast hook: %s", testenv.DescribeOperation(stuck))
	started := stuck.Status.OperationState.StartedAt

	obj := &v1alpha1.Application{}
	obj.Name, obj.Namespace = app.Name, stack.Namespace
	// hand-written state: no controller clears .operation of a Running operation (only setOperationState's patch of a
	// completed phase does); a person does, as the workaround of argo-cd #17155 says — this is that person's write.
	require.NoError(t, stack.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(`{"operation":null}`))))
	orphaned, changed := app.WaitApp(t, 15*time.Second, func(a *v1alpha1.Application) bool {
		return a.Operation != nil || phase(a) != synccommon.OperationRunning
	})
	require.False(t, changed, "the controller leaves the orphaned state alone: %s, operation %v", testenv.DescribeOperation(orphaned), orphaned.Operation)
	r.Controller = fmt.Sprintf("operation %s; after .operation was cleared the controller left status.operationState Running (15s watched)", testenv.DescribeOperation(orphaned))

	ops := stack.CountOperations(t, app.Name)
	d := startServeDaemon(t, app, safetyPolicy)
	lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "fast")}
	root := announcedAbout(t, d.slack, lost.rule, lost.object, announceWithin+15*time.Second)
	var applied time.Time
	require.Eventually(t, func() bool {
		for _, reply := range d.slack.replies(root.TS) {
			if strings.HasPrefix(reply, ":hammer_and_wrench: Applying") && applied.IsZero() {
				applied = time.Now()
			}
		}
		return !applied.IsZero()
	}, remedyWithin, tick, "the remedy is applied: %s", d.slack.summary())
	var said string
	require.Eventually(t, func() bool {
		for _, reply := range d.slack.replies(root.TS) {
			if strings.Contains(strings.ToLower(reply), "no operation is in progress") {
				said = reply
				return true
			}
		}
		return false
	}, noOperationWithin, tick, "the thread says at once why the remedy stopped: %s", d.slack.summary())
	r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed announced; terminate-and-resync stopped (it took %s): %s",
		time.Since(applied).Round(time.Second), firstLineOf(said))

	waitFor(nearMissWindow, func() bool { return len(appliedRemedies(d.slack)) > 1 })
	terminations, syncs := ops.Counts()
	held := app.Get(t)
	require.Zero(t, terminations, "nothing terminated")
	require.Zero(t, syncs, "nothing synced over the orphaned operation")
	require.Len(t, appliedRemedies(d.slack), 1, "the remedy is not repeated: %s", d.slack.summary())
	require.Equal(t, synccommon.OperationRunning, phase(held), testenv.DescribeOperation(held))
	require.True(t, held.Status.OperationState.StartedAt.Equal(&started), "the same operation state")
	r.Syncmedic += fmt.Sprintf("; %s later: no terminate, no sync, not repeated", nearMissWindow)
	onlyAnnounced(t, d.slack, lost)
}
