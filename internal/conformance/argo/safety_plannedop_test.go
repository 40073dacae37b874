package argo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Issue 45 items 2–4 on the real v3.6.1 controller and argocd-server: terminate-and-resync acts only on the operation
// it was planned for, re-syncs exactly what that operation deployed, and never terminates an operation whose new
// Sync argocd-server would refuse. Each subtest builds a real Running operation (ScenarioRealWindowedWave: a PreSync
// wave whose two hooks run until released) and calls the remedy as serve and a fix on demand do.
func TestTerminateAndResyncActsOnlyOnThePlannedOperation(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV3
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})

	t.Run("on "+version+" an operation that ends by itself between plan and confirm is not synced again", func(t *testing.T) {
		t.Parallel()
		r := row(version, "terminate-and-resync planned (dry run) on a Running manual sync; its hooks are released and the operation ends by itself before the confirmation")
		record(t, r)
		app := testenv.ScenarioRealWindowedWave(t, stack)
		running := app.Get(t)
		started := running.Status.OperationState.StartedAt
		finding := resyncFindingOf(running)
		rem := remedyThrough(t, stack.Addr, stack.AdminToken(t))

		plan, err := rem.Remediate(context.Background(), finding, true)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("Get app=%s/%s: operation started at %s, phase Running (the plan is for this operation only)",
			stack.Namespace, app.Name, started.UTC().Format(time.RFC3339)), plan.Steps[0], "the plan names the live operation")

		app.Release(t, "fast")
		app.Release(t, "slow")
		ended, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			st := a.Status.OperationState
			return st != nil && st.StartedAt.Equal(&started) && st.Phase.Completed()
		})
		require.True(t, ok, "the controller ends the operation: %s", testenv.DescribeOperation(ended))
		require.Equal(t, synccommon.OperationSucceeded, phase(ended), testenv.DescribeOperation(ended))
		history := len(ended.Status.History)
		r.Controller = "plan on " + testenv.DescribeOperation(running) + "; hooks released: " + testenv.DescribeOperation(ended)

		ops := stack.CountOperations(t, app.Name)
		replan, planErr := rem.Remediate(context.Background(), finding, true)
		out, err := rem.Remediate(context.Background(), finding, false)
		waitFor(15*time.Second, func() bool { n, s := ops.Counts(); return n+s > 0 })
		after := app.Get(t)
		terminations, syncs := ops.Counts()
		r.Syncmedic = fmt.Sprintf("confirm (dry run again): %v; apply: steps %v, error %v; terminations %d, new syncs %d, history %d → %d entries",
			planErr, out.Steps, err, terminations, syncs, history, len(after.Status.History))

		require.Error(t, planErr, "the confirmation's dry run refuses: steps %v", replan.Steps)
		require.True(t, syncmedic.IsPermanent(planErr), "%v", planErr)
		want := fmt.Sprintf("the operation this plan was for (app=%s/%s, started at %s) ended at %s (phase Succeeded: %s); nothing to fix",
			stack.Namespace, app.Name, started.UTC().Format(time.RFC3339), ended.Status.OperationState.FinishedAt.UTC().Format(time.RFC3339),
			ended.Status.OperationState.Message)
		require.EqualError(t, planErr, want+" — re-plan if it is stuck again")
		require.NoError(t, err, "an outcome, not an error that retries")
		require.Equal(t, []string{want + ": not syncing again"}, out.Steps)
		require.False(t, out.Changed)
		require.Zero(t, terminations, "nothing terminated")
		require.Zero(t, syncs, "nothing synced")
		require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "the same operation: %s", testenv.DescribeOperation(after))
		require.Len(t, after.Status.History, history, "the operation history shows no extra sync")
	})

	t.Run("on "+version+" with automated.enabled false the re-sync names the operation's revision", func(t *testing.T) {
		t.Parallel()
		r := row(version, "terminate-and-resync of a Running manual sync of an application with spec.syncPolicy.automated.enabled: false; a new commit pushed to its branch meanwhile")
		record(t, r)
		app := testenv.ScenarioRealWindowedWave(t, stack)
		app.DisableAutoSync(t)
		running := app.Get(t)
		started := running.Status.OperationState.StartedAt
		stuckRev := running.Status.OperationState.Operation.Sync.Revision
		require.NotEmpty(t, stuckRev, "argocd-server records the commit it resolved")
		head := app.Update(t, testenv.ConfigMapData{Data: map[string]string{"revision": "2"}}, testenv.WindowedWaveHooks()...)
		require.NotEqual(t, stuckRev, head)

		ops := stack.CountOperations(t, app.Name)
		out, err := remedyThrough(t, stack.Addr, stack.AdminToken(t)).Remediate(context.Background(), resyncFindingOf(running), false)
		terminations, syncs := ops.Counts()
		r.Syncmedic = fmt.Sprintf("terminate-and-resync: steps %v; error: %v; terminations %d, new syncs %d", out.Steps, err, terminations, syncs)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Equal(t, "Sync app="+stack.Namespace+"/"+app.Name+" revision="+stuckRev, out.Steps[len(out.Steps)-1], "the Sync names the operation's commit")

		app.Release(t, "fast")
		app.Release(t, "slow")
		after, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			st := a.Status.OperationState
			return st != nil && st.StartedAt.After(started.Time) && st.Phase.Completed()
		})
		r.Controller = fmt.Sprintf("%s at commit %s, then %s pushed to main; after the remedy: %s", testenv.DescribeOperation(running), stuckRev, head, testenv.DescribeOperation(after))
		require.True(t, ok, "the new sync ends: %s", testenv.DescribeOperation(after))
		require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
		require.Equal(t, stuckRev, after.Status.OperationState.SyncResult.Revision, "the stuck operation's commit is deployed, not the branch head %s", head)
		terminations, syncs = ops.Counts()
		require.Equal(t, 1, terminations, "terminated once")
		require.Equal(t, 1, syncs, "synced again once")
	})

	t.Run("on "+version+" with server.sync.replace.allowed false a Replace=true sync is not terminated", func(t *testing.T) {
		t.Parallel()
		r := row(version, `terminate-and-resync of a Running sync carrying Replace=true, through an argocd-server started with server.sync.replace.allowed: "false" (argocd-cmd-params-cm)`)
		record(t, r)
		server := stack.StartServerReplica(t, "ARGOCD_SYNC_WITH_REPLACE_ALLOWED=false")
		app := testenv.ScenarioRealWindowedWaveWith(t, stack, synccommon.SyncOptionReplace)
		running := app.Get(t)
		started := running.Status.OperationState.StartedAt
		require.Equal(t, v1alpha1.SyncOptions{synccommon.SyncOptionReplace}, running.Status.OperationState.Operation.Sync.SyncOptions)
		token := stack.AdminToken(t)
		req := resyncRequestOf(t, running)
		refusal := syncError(stack.Applications(t, token), req) // the stack's own server allows replace
		replicaRefusal := replicaSyncError(t, server.Addr, token, req)
		r.Controller = fmt.Sprintf("%s with %s; the Sync the remedy would send is answered %v by that argocd-server (%v by one allowing replace)",
			testenv.DescribeOperation(running), synccommon.SyncOptionReplace, replicaRefusal, refusal)
		require.Equal(t, codes.FailedPrecondition, status.Code(replicaRefusal), "%v", replicaRefusal)
		require.Contains(t, replicaRefusal.Error(), argocd.ErrReplaceRefused)

		ops := stack.CountOperations(t, app.Name)
		out, err := remedyThrough(t, server.Addr, token).Remediate(context.Background(), resyncFindingOf(running), false)
		held := app.Get(t)
		terminations, syncs := ops.Counts()
		r.Syncmedic = fmt.Sprintf("terminate-and-resync: steps %v; error: %v; terminations %d, new syncs %d", out.Steps, err, terminations, syncs)
		require.Error(t, err, "steps: %v", out.Steps)
		require.True(t, syncmedic.IsPermanent(err), "reported once, not retried: %v", err)
		require.ErrorContains(t, err, "argocd-server's settings say it does not allow it (syncWithReplaceAllowed is false)")
		require.ErrorContains(t, err, "argocd app terminate-op "+app.Name)
		require.Equal(t, []string{"app=" + stack.Namespace + "/" + app.Name + ": the new sync carries Replace=true and argocd-server's settings say it does not allow it (syncWithReplaceAllowed is false): not terminating"}, out.Steps)
		require.False(t, out.Changed)
		require.Zero(t, terminations, "nothing terminated")
		require.Zero(t, syncs)
		require.Equal(t, synccommon.OperationRunning, phase(held), testenv.DescribeOperation(held))
		require.True(t, held.Status.OperationState.StartedAt.Equal(&started), "the same operation")

		app.Release(t, "fast")
		app.Release(t, "slow")
		ended, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			st := a.Status.OperationState
			return st != nil && st.Phase.Completed()
		})
		r.Controller += "; hooks released: " + testenv.DescribeOperation(ended)
		require.True(t, ok, "the spared operation ends: %s", testenv.DescribeOperation(ended))
		require.Equal(t, synccommon.OperationSucceeded, phase(ended), testenv.DescribeOperation(ended))
		require.True(t, ended.Status.OperationState.StartedAt.Equal(&started), "the same operation, never terminated")
	})
}

// remedyThrough is syncmedic's terminate-and-resync remedy talking to the argocd-server at addr with token, as serve
// builds it.
func remedyThrough(t *testing.T, addr, token string) syncmedic.Remedier {
	t.Helper()
	file := filepath.Join(t.TempDir(), "argocd-token")
	require.NoError(t, os.WriteFile(file, []byte(token), 0o600))
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true, TokenFile: file})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, StopTimeout: time.Minute})
	require.NoError(t, err)
	return rem.Remediers()[syncmedic.ActionTerminateAndResync]
}

// replicaSyncError sends req to the argocd-server at addr and returns its answer.
func replicaSyncError(t *testing.T, addr, token string, req *applicationpkg.ApplicationSyncRequest) error {
	t.Helper()
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true, Token: token})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	return syncError(c.ApplicationServiceClient, req)
}
