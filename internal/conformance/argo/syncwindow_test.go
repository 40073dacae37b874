package argo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// setDenyWindow adds (or, with on false, removes) a deny sync window open now for one application of the stack's
// default project, as an Argo CD admin does with
// `argocd proj windows add default --kind deny --schedule '* * * * *' --duration 1h --applications <app>`.
// The window names the application: the stack and its project are shared with the tests running in parallel, and a
// window on every application ("*") would hold their syncs too.
func setDenyWindow(t *testing.T, stack *testenv.RealArgoCD, app string, on bool) {
	t.Helper()
	setDenyWindowFor(t, stack, app, on, false)
}

// setDenyWindowFor is setDenyWindow with the window's manualSync (`--manual-sync`): such a window lets people sync
// by hand and blocks only automated syncs, and the controller goes on processing a manually started operation.
func setDenyWindowFor(t *testing.T, stack *testenv.RealArgoCD, app string, on, manualSync bool) {
	t.Helper()
	key := client.ObjectKey{Namespace: stack.Namespace, Name: v1alpha1.DefaultAppProjectName}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.AppProject{}
		if err := stack.Env.Client.Get(context.Background(), key, p); err != nil {
			return err
		}
		// Only this application's window changes: the windows of the tests running beside it stay.
		kept := v1alpha1.SyncWindows{}
		for _, w := range p.Spec.SyncWindows {
			if len(w.Applications) != 1 || w.Applications[0] != app {
				kept = append(kept, w)
			}
		}
		if on {
			kept = append(kept, &v1alpha1.SyncWindow{Kind: "deny", Schedule: "* * * * *", Duration: "1h",
				Applications: []string{app}, ManualSync: manualSync})
		}
		p.Spec.SyncWindows = kept
		return stack.Env.Client.Update(context.Background(), p)
	}))
}

// Issue 13 item 6 and issue 26 item 2 on the real controller: v2.14.21 loses a TTL-deleted fast hook beside a slow
// one, and its sync waits forever. A deny sync window with manualSync is then opened for the application: the
// controller goes on processing the manually started operation (controller/sync.go judges a running operation as
// manual unless auto-sync started it), and argocd-server's GetApplicationSyncWindows answers canSync=true (it answers
// as for a manual sync), yet the window blocks every unattended sync. syncmedic's terminate-and-resync is unattended:
// it judges the windows as the controller judges an automated sync, leaves the operation running and says why in the
// thread (on ffc7976, which trusted canSync, it terminated and re-synced during the freeze); once the window is gone,
// the remedy goes ahead. A plain deny window instead pauses the operation itself ("Sync operation blocked by sync
// window") and the hook rules stay silent: TestDenyWindowOpenedMidWave.
func TestSyncWindowHoldsTheTerminateOfALostHook(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	r := row(version, "lost hook while a deny sync window with manualSync is open (terminate-and-resync guarded)")
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	record(t, r)
	app := testenv.ScenarioRealSlowAndFastWave(t, stack)
	app.Release(t, "slow")
	require.True(t, app.WaitJob(t, "slow", controllerWindow, func(j *batchv1.Job) bool {
		_, desc := app.JobState(t, "slow")
		return j == nil || strings.HasPrefix(desc, "Complete")
	}), "the slow hook completes")
	stuck, finished := app.WaitApp(t, controllerWindow, testenv.OperationCompleted)
	require.False(t, finished, "v2.14.21 never sees the fast hook finish: %s", testenv.DescribeOperation(stuck))
	started := stuck.Status.OperationState.StartedAt
	r.Controller = "operation " + testenv.DescribeOperation(stuck) + "; a deny window (* * * * *, 1h, manualSync) is then opened on the project for this application"

	setDenyWindowFor(t, stack, app.Name, true, true)
	srv := startServe(t, app, autoPolicy)
	lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "fast")}
	root := announcedAbout(t, srv, lost.rule, lost.object, announceWithin+30*time.Second)
	require.Eventually(t, func() bool {
		for _, reply := range srv.replies(root.TS) {
			if strings.Contains(reply, "sync window") {
				return true
			}
		}
		return false
	}, remedyWithin, tick, "the thread says the sync window holds the remedy: %s", srv.summary())
	held := app.Get(t)
	require.Equal(t, synccommon.OperationRunning, phase(held), "the operation was not terminated: %s", testenv.DescribeOperation(held))
	require.True(t, held.Status.OperationState.StartedAt.Equal(&started), "still the same operation")
	r.Syncmedic = "argocd/hook-completion-missed announced; the thread says a sync window blocks unattended syncs, so terminate-and-resync waits (argocd-server said canSync=true); the operation is left running"

	setDenyWindow(t, stack, app.Name, false)
	moved, ok := app.WaitApp(t, 2*remedyWithin, func(a *v1alpha1.Application) bool {
		op := a.Status.OperationState
		return op != nil && op.StartedAt.After(started.Time)
	})
	require.True(t, ok, "once the window is gone the remedy terminates and syncs again: %s", testenv.DescribeOperation(moved))
	r.Syncmedic += "; once the window closed, it terminated and started a new sync (" + testenv.DescribeOperation(moved) + ")"
	onlyAnnounced(t, srv, lost)
}
