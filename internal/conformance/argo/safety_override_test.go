package argo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// overrideSetting is the row text naming the argocd-cm setting the tests turn on.
const overrideSetting = testenv.RequireOverrideForRevisionSync + `: "true"`

// Issue 26 item 3, second bullet, on the real v3.6.1. A sync started through argocd-server without a revision (what
// `argocd app sync` does) records the revision it resolved, a commit, in the operation (server/application Sync:
// SyncOperation.Revision); terminate-and-resync repeats that revision, which is not the application's targetRevision,
// so with application.sync.requireOverridePrivilegeForRevisionSync: "true" in argocd-cm v3.6.1's argocd-server checks
// `applications, override` (resolveSourceRevisions) before it looks at the operation in progress.
//
// The lost hook itself cannot be reached on v3.6.1: when a hook the operation runs is gone, gitops-engine v3.6.1
// (sync_context.go 595-610) records the hook in Error, "Resource batch/Job/<name> is missing, it might have been
// deleted", and the operation ends Failed at the controller's next look, so hook-completion-missed never sees it Running (the first subtest proves this with the
// fast hook lost as in TestLostHookIsNotTerminatedUnderADenyWindow). The refusal is therefore proven at the lowest
// real level, on a real Running operation of the real controller (a PreSync wave whose two hooks run until
// released): the real argocd-server answers the Sync the remedy would send with PermissionDenied for an account with
// applications get and sync only (admin, which has override, is answered "another operation is already in
// progress": the same request passes the check), and syncmedic's terminate-and-resync, asked with that account's
// token to act on the operation, refuses before terminating (CanI says no): nothing is terminated, the error names
// the missing permission and the policy line to add, and once its hooks are released the spared operation succeeds.
// With override (admin) the same remedy terminates and syncs the same commit again, once, and the new sync succeeds.
func TestTerminateAndResyncNeedsTheOverridePermission(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV3
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	on := "true"
	stack.SetSetting(t, testenv.RequireOverrideForRevisionSync, &on)
	// Runs after the parallel subtests: the stack is shared, and no other test expects the setting.
	t.Cleanup(func() { stack.SetSetting(t, testenv.RequireOverrideForRevisionSync, nil) })

	t.Run("on "+version+" a lost hook ends the operation by itself", func(t *testing.T) {
		t.Parallel()
		r := row(version, "lost fast hook of a manual sync (controller paused while the TTL-0 Job finished and went, the hook finalizer removed as a person does)")
		record(t, r)
		// The resumed application-controller can still replay the fast Job's completion from the watch events it
		// queued while paused, before the deletion (on the real node it did once in a full run: Succeeded); the race
		// is then run again on a new app, as fastHookRace does, so that the row describes the lost hook.
		var ended *v1alpha1.Application
		for attempt := 1; ; attempt++ {
			app := testenv.ScenarioRealWindowedWave(t, stack)
			started := app.Get(t).Status.OperationState.StartedAt
			loseHook(t, stack, app, "fast")
			app.Release(t, "slow")
			var ok bool
			ended, ok = app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
				st := a.Status.OperationState
				return st != nil && st.StartedAt.Equal(&started) && st.Phase.Completed()
			})
			require.True(t, ok, "the controller ends the operation: %s", testenv.DescribeOperation(ended))
			if phase(ended) != synccommon.OperationSucceeded || testenv.HookResult(ended, "fast") != synccommon.OperationSucceeded || attempt == 3 {
				break
			}
			t.Logf("attempt %d: the resumed controller saw the fast hook finish after all (%s); again on a new app", attempt, testenv.DescribeOperation(ended))
		}
		r.Controller = testenv.DescribeOperation(ended)
		r.Syncmedic = "(nothing to act on: the operation is not Running, so hook-completion-missed and terminate-and-resync never apply)"
		require.Equal(t, synccommon.OperationFailed, phase(ended), testenv.DescribeOperation(ended))
		require.Equal(t, synccommon.OperationError, testenv.HookResult(ended, "fast"), "the hook is recorded as an error")
		require.Contains(t, hookMessage(ended, "fast"), "is missing")
	})

	t.Run("on "+version+" without override the remedy refuses before terminating", func(t *testing.T) {
		t.Parallel()
		r := row(version, fmt.Sprintf("terminate-and-resync of a Running manual sync (revision resolved to a commit); argocd-cm %s; "+
			"the account has applications get and sync but not override", overrideSetting))
		record(t, r)
		// One name per stack (the stack lives as long as the test binary): adding it again, with -count, changes nothing.
		account := "nooverride"
		role := "role:" + account
		token := stack.AddAccount(t, account,
			"p, "+role+", applications, get, */*, allow",
			"p, "+role+", applications, sync, */*, allow",
			"g, "+account+", "+role)
		require.Eventually(t, func() bool { return stack.CanI(t, token, "sync", "default/*") }, 30*time.Second, 100*time.Millisecond,
			"argocd-server grants the account sync")
		require.False(t, stack.CanI(t, token, "override", "default/*"), "but not override")

		app := testenv.ScenarioRealWindowedWave(t, stack)
		running := app.Get(t)
		started := running.Status.OperationState.StartedAt
		req := resyncRequestOf(t, running)
		refusal := refusedSync(t, stack, token, req)
		admin := syncError(stack.Applications(t, stack.AdminToken(t)), req)
		r.Controller = fmt.Sprintf("%s naming revision %s (targetRevision %q); argocd-server answers that Sync: %v; admin (with override): %v",
			testenv.DescribeOperation(running), req.GetRevision(), running.Spec.GetSource().TargetRevision, refusal, admin)
		require.Equal(t, codes.FailedPrecondition, status.Code(admin), "with override the same Sync passes the check: %v", admin)
		require.Contains(t, admin.Error(), "another operation is already in progress")

		ops := stack.CountOperations(t, app.Name)
		out, err := resyncRemedy(t, stack, token).Remediate(context.Background(), resyncFindingOf(running), false)
		held := app.Get(t)
		terminations, syncs := ops.Counts()
		r.Syncmedic = fmt.Sprintf("terminate-and-resync: steps %v; error: %v; terminations %d, new syncs %d", out.Steps, err, terminations, syncs)
		require.Zero(t, terminations, "nothing was terminated: %s", testenv.DescribeOperation(held))
		require.Zero(t, syncs, "nothing was synced")
		require.Equal(t, synccommon.OperationRunning, phase(held), testenv.DescribeOperation(held))
		require.True(t, held.Status.OperationState.StartedAt.Equal(&started), "the same operation")
		require.False(t, out.Changed)
		require.Error(t, err, "steps: %v", out.Steps)
		require.True(t, syncmedic.IsPermanent(err), "a refusal is not retried: %v", err)
		require.ErrorContains(t, err, "applications, override, default/"+app.Name, "it names the missing permission")
		require.ErrorContains(t, err, "p, role:syncmedic, applications, override, default/"+app.Name+", allow", "and the policy line to add")
		require.Contains(t, strings.Join(out.Steps, " / "), "not terminating")

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
		terminations, syncs = ops.Counts()
		require.Zero(t, terminations)
		require.Zero(t, syncs)
	})

	t.Run("on "+version+" with override the remedy terminates and syncs again once", func(t *testing.T) {
		t.Parallel()
		r := row(version, fmt.Sprintf("terminate-and-resync of a Running manual sync (revision resolved to a commit); argocd-cm %s; "+
			"the account (admin) has override", overrideSetting))
		record(t, r)
		token := stack.AdminToken(t)
		app := testenv.ScenarioRealWindowedWave(t, stack)
		running := app.Get(t)
		started := running.Status.OperationState.StartedAt
		req := resyncRequestOf(t, running)
		require.True(t, stack.CanI(t, token, "override", "default/"+app.Name), "admin has override")

		ops := stack.CountOperations(t, app.Name)
		out, err := resyncRemedy(t, stack, token).Remediate(context.Background(), resyncFindingOf(running), false)
		terminations, syncs := ops.Counts()
		r.Syncmedic = fmt.Sprintf("terminate-and-resync: steps %v; error: %v; terminations %d, new syncs %d", out.Steps, err, terminations, syncs)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.True(t, out.Changed)
		require.Equal(t, 1, terminations, "terminated once")
		require.Equal(t, 1, syncs, "synced again once")

		app.Release(t, "fast")
		app.Release(t, "slow")
		after, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			st := a.Status.OperationState
			return st != nil && st.StartedAt.After(started.Time) && st.Phase.Completed()
		})
		r.Controller = fmt.Sprintf("%s naming revision %s; after the remedy, hooks released: %s",
			testenv.DescribeOperation(running), req.GetRevision(), testenv.DescribeOperation(after))
		require.True(t, ok, "the new sync ends: %s", testenv.DescribeOperation(after))
		require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
		require.Equal(t, req.GetRevision(), after.Status.OperationState.Operation.Sync.Revision, "the same commit, named by the new sync")
		terminations, syncs = ops.Counts()
		require.Equal(t, 1, terminations, "still once")
		require.Equal(t, 1, syncs, "still once")
	})
}

// loseHook makes hook name of ScenarioRealWindowedWave finish unseen: with the controller paused (SIGSTOP), its Pod
// exits, the real TTL controller deletes the Job, and the test removes the hook finalizer that holds it, as a person
// does (RemoveHookFinalizer re-reads the Job, so the garbage collector's own finalizer changes do not race it).
func loseHook(t *testing.T, stack *testenv.RealArgoCD, app *testenv.RealHookApp, name string) {
	t.Helper()
	resume := stack.PauseController(t)
	defer resume()
	app.Release(t, name)
	require.True(t, app.WaitJob(t, name, controllerWindow, func(j *batchv1.Job) bool { return j == nil || j.DeletionTimestamp != nil }),
		"the TTL controller deletes the finished Job")
	app.RemoveHookFinalizer(t, name)
	require.True(t, app.WaitJob(t, name, controllerWindow, func(j *batchv1.Job) bool { return j == nil }), "the Job is gone")
}

// hookMessage is the message app's operation state records for hook name.
func hookMessage(app *v1alpha1.Application, name string) string {
	if st := app.Status.OperationState; st != nil && st.SyncResult != nil {
		for _, r := range st.SyncResult.Resources {
			if r.HookType != "" && r.Name == name {
				return r.Message
			}
		}
	}
	return ""
}

// resyncRemedy is syncmedic's terminate-and-resync remedy talking to stack's argocd-server with token, as serve
// builds it.
func resyncRemedy(t *testing.T, stack *testenv.RealArgoCD, token string) syncmedic.Remedier {
	t.Helper()
	return remedyThrough(t, stack.Addr, token)
}

// resyncFindingOf is the finding hook-completion-missed reports for app's operation, reduced to what its
// terminate-and-resync remedy reads: the application and the start of the stuck operation.
func resyncFindingOf(app *v1alpha1.Application) syncmedic.Finding {
	return syncmedic.Finding{Rule: syncmedic.RuleHookCompletionMissed, Fingerprint: "fp-" + app.Name,
		Remedy: syncmedic.Remedy{Action: syncmedic.ActionTerminateAndResync, Params: map[string]string{
			rules.ParamApp: app.Name, rules.ParamAppNamespace: app.Namespace, rules.ParamProject: app.Spec.Project,
			rules.ParamOperationStartedAt: app.Status.OperationState.StartedAt.UTC().Format(time.RFC3339),
		}}}
}

// resyncRequestOf is the Sync terminate-and-resync sends for the manual sync of app (argocd syncRequest): the
// operation's revision, here a commit, which must differ from the targetRevision for the override check to apply.
func resyncRequestOf(t *testing.T, app *v1alpha1.Application) *applicationpkg.ApplicationSyncRequest {
	t.Helper()
	so := app.Status.OperationState.Operation.Sync
	require.NotNil(t, so)
	target := app.Spec.GetSource().TargetRevision
	if target == "" {
		target = "HEAD"
	}
	require.True(t, app.Spec.SyncPolicy == nil || app.Spec.SyncPolicy.Automated == nil, "a manual sync: the remedy names the operation's revision")
	require.NotEmpty(t, so.Revision, "argocd-server records the revision it resolved")
	require.NotEqual(t, target, so.Revision, "a commit, not the targetRevision")
	name, ns, project, rev, prune := app.Name, app.Namespace, app.Spec.Project, so.Revision, so.Prune
	return &applicationpkg.ApplicationSyncRequest{Name: &name, AppNamespace: &ns, Project: &project, Revision: &rev, Prune: &prune,
		SyncOptions: &applicationpkg.SyncOptions{Items: so.SyncOptions}, Strategy: so.SyncStrategy}
}

// refusedSync sends req with token until argocd-server answers PermissionDenied (its settings informer sees the
// argocd-cm change a moment later; until then the answer is "another operation is already in progress", which
// changes nothing), and returns that answer.
func refusedSync(t *testing.T, stack *testenv.RealArgoCD, token string, req *applicationpkg.ApplicationSyncRequest) error {
	t.Helper()
	apps := stack.Applications(t, token)
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err = syncError(apps, req)
		if status.Code(err) == codes.PermissionDenied {
			return err
		}
		require.Error(t, err, "the Sync must never be accepted while the operation runs")
		require.Contains(t, err.Error(), "another operation is already in progress", "nothing else refuses it")
		require.False(t, time.Now().After(deadline), "argocd-server refuses the Sync without override within 30s: last answer %v", err)
	}
}

func syncError(apps applicationpkg.ApplicationServiceClient, req *applicationpkg.ApplicationSyncRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := apps.Sync(ctx, req)
	return err
}
