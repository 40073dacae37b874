package argo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// holdFinalizer is a finalizer no controller removes: it keeps a resource of the app terminating.
const holdFinalizer = "example.com/hold"

// deletionPolicy reports app deletions held past a few seconds (notify only: no remedy exists).
const deletionPolicy = `resolveAfter: 1
rules:
  argocd/app-deletion-stuck: {mode: notify, threshold: 5s}
` + routes

// An Application deleted with Argo CD's resources finalizer while one of its resources is held by another
// finalizer: the real application-controller deletes what it can and waits; syncmedic names the resource that
// blocks it, and the incident resolves once the resource and the Application are gone.
func TestAppDeletionHeldByAResource(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" an app whose ConfigMap cannot go is reported with that ConfigMap until both are gone", func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := row(version, "application deletion held by a resource stuck terminating")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app := testenv.NewRealHookApp(t, stack, "deleting", testenv.ConfigMapData{})
			start := time.Now()
			app.Sync(t)
			got, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok && phase(got) == synccommon.OperationSucceeded, "the app syncs: %s", testenv.DescribeOperation(got))
			// The controller deletes what its cluster cache holds for the app: wait until its status shows the
			// ConfigMap live and in sync, or a deletion right after the sync can find nothing to wait for and finish
			// at once (seen on v3.6.1 under load: finalize_application_deletion in 15 ms, before the cache had it).
			got, ok = app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
				for _, r := range a.Status.Resources {
					if r.Kind == "ConfigMap" && r.Name == "settings" && r.Status == v1alpha1.SyncStatusCodeSynced {
						return true
					}
				}
				return false
			})
			require.True(t, ok, "the controller sees the ConfigMap in sync: %+v", got.Status.Resources)

			cm := &corev1.ConfigMap{}
			key := types.NamespacedName{Namespace: app.Namespace, Name: "settings"}
			mutate := func(obj client.Object, change func()) {
				require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
						return err
					}
					change()
					return env.Client.Update(ctx, obj)
				}))
			}
			cm.Name, cm.Namespace = key.Name, key.Namespace
			mutate(cm, func() { cm.Finalizers = append(cm.Finalizers, holdFinalizer) })
			a := &v1alpha1.Application{}
			a.Name, a.Namespace = app.Name, stack.Namespace
			mutate(a, func() { a.Finalizers = append(a.Finalizers, v1alpha1.ResourcesFinalizerName) })
			require.NoError(t, env.Client.Delete(ctx, a))

			srv := startServe(t, app, deletionPolicy)
			deleting := incident{rule: syncmedic.RuleAppDeletionStuck, object: appObject(app)}
			root := announcedAbout(t, srv, deleting.rule, deleting.object, announceWithin)
			require.Contains(t, root.Text, "deleting")
			require.NoError(t, env.Client.Get(ctx, key, cm))
			require.NotNil(t, cm.DeletionTimestamp, "the controller deleted the ConfigMap; the other finalizer holds it")
			held := app.Get(t)
			r.Controller = fmt.Sprintf("Application deleting with finalizers %v; its ConfigMap deleting, held by %s", held.Finalizers, holdFinalizer)
			r.Syncmedic = "argocd/app-deletion-stuck announced (notify): " + root.Text

			mutate(cm, func() { cm.Finalizers = nil })
			require.True(t, waitFor(remedyWithin, func() bool {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), &v1alpha1.Application{})
				return apierrors.IsNotFound(err)
			}), "the real controller completes the deletion once the resource is gone")
			require.True(t, waitFor(announceWithin, func() bool { return len(srv.Thread(root.TS)) > 0 && strings.Contains(srv.Summary(), "Resolved") }),
				"the incident resolves: %s", srv.Summary())
			r.Controller += "; once the ConfigMap's finalizer was removed the controller finished and the Application went away"
			r.Syncmedic += "; resolved when the Application was gone"
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.Summary())
			onlyAnnounced(t, srv, deleting)
		})
	}
}
