package argo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// hookNotDeletedPolicy notifies argocd/hook-not-deleted after 5 s and routes it by the Application's label to its
// own channel (the route matches the label testenv puts on every RealHookApp).
const hookNotDeletedPolicy = `resolveAfter: 1
rules:
  argocd/hook-not-deleted: {mode: notify, threshold: 5s}
routes:
  - name: held-hooks
    match:
      labels: {"` + testenv.RealAppLabel + `": "held-hook-*"}
    slackChannel: "#held-hooks"
`

// An old hook Job that another controller's finalizer holds: the second sync of an app whose PreSync hook has the
// default delete policy (BeforeHookCreation) deletes the old Job before creating the new one and waits for it to go.
// v3.6.1 says "waiting for deletion of hook batch/Job/migrate" meanwhile; v2.14.21 says only "one or more tasks are
// running" (its gitops-engine's "waiting for deletion of" names pruned resources and hooks deleted on phase
// completion, not this one). syncmedic announces
// argocd/hook-not-deleted, naming the foreign finalizer; once its controller removes it, the real
// application-controller creates the new hook, the sync succeeds and the incident resolves.
func TestOldHookHeldByAForeignFinalizer(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a sync waiting for the deletion of an old hook held by another finalizer is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, "old hook held by a foreign finalizer (BeforeHookCreation)")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealHookHeldByForeignFinalizer(t, stack)
			require.True(t, app.WaitJob(t, "migrate", controllerWindow, func(j *batchv1.Job) bool {
				return j != nil && j.DeletionTimestamp != nil
			}), "the controller deletes the old hook before re-creating it")
			// Give the controller time to finish on its own, were it able to.
			_, finished := app.WaitApp(t, nearMissWindow, completedSince(start))
			got := app.Get(t)
			_, jobDesc := app.JobState(t, "migrate")
			r.Controller = fmt.Sprintf("operation %s; old hook Job %s", testenv.DescribeOperation(got), jobDesc)
			require.False(t, finished, "the sync cannot finish while the old hook is held: %s", testenv.DescribeOperation(got))
			require.Equal(t, synccommon.OperationRunning, phase(got))

			srv := startServe(t, app, hookNotDeletedPolicy)
			held := incident{rule: syncmedic.RuleHookNotDeleted, object: jobObject(app, "migrate")}
			root := announcedIn(t, srv, "#held-hooks", held, announceWithin)
			require.Contains(t, root.Blocks, testenv.ForeignFinalizer, "the message names the finalizer that holds the hook")
			r.Syncmedic = "argocd/hook-not-deleted announced in the label-routed channel, naming " + testenv.ForeignFinalizer

			app.ReleaseForeignFinalizer(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok, "the sync ends once the old hook is gone: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.True(t, app.WaitJob(t, "migrate", controllerWindow, func(j *batchv1.Job) bool {
				return j != nil && j.DeletionTimestamp == nil
			}), "the new hook Job exists")
			require.Eventually(t, func() bool {
				for _, m := range srv.all() {
					if m.Method == "chat.update" && m.TS == root.TS && strings.Contains(strings.ToLower(m.Text+m.Blocks), "resolved") {
						return true
					}
				}
				return false
			}, announceWithin, tick, "the incident resolves once the sync moved on: %s", srv.summary())
			r.Syncmedic += "; resolved after the finalizer's controller let go, next sync " + string(phase(after))
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.summary())
			onlyAnnounced(t, srv, held)
		})
	}
}
