package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scenarios of an Application's deletion on a real Argo CD stack.

// PreDeleteFinalizer is the finalizer Argo CD v3.6 adds to an application whose manifests have a PreDelete hook
// (argo-cd v3.6.1 controller/appcontroller.go:2133-2147); it runs the PreDelete hooks before anything is deleted.
const PreDeleteFinalizer = "pre-delete-finalizer.argocd.argoproj.io"

// PreDeleteHookName is the PreDelete hook Job of ScenarioRealPreDeleteHook.
const PreDeleteHookName = "pre-delete-check"

// PreDeleteHook is ScenarioRealPreDeleteHook's hook Job in git, its Pod run as run says.
func PreDeleteHook(run PodRun, image string) RealHook {
	return RealHook{Name: PreDeleteHookName, Hook: synccommon.HookType("PreDelete"), Image: image, Run: run}
}

// ScenarioRealPreDeleteHook: an application whose git source holds the ConfigMap and a PreDelete hook Job
// (PreDeleteHookName, its Pod run as run says), synced. Argo CD v3.6 runs PreDelete hooks only when the application
// is deleted (not during a sync) and adds PreDeleteFinalizer (and its "/cleanup" stage) when it compares the app. It
// returns once the sync succeeded, the controller lists the ConfigMap in sync (a deletion before its cache has it can
// finish with nothing to wait for) and the Application carries PreDeleteFinalizer. DeleteCascade deletes it.
func ScenarioRealPreDeleteHook(t testing.TB, stack *RealArgoCD, run PodRun) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "pre-delete", ConfigMapData{}, PreDeleteHook(run, ""))
	start := time.Now()
	app.Sync(t)
	got, ok := app.WaitApp(t, 2*time.Minute, func(a *v1alpha1.Application) bool {
		if !OperationCompleted(a) || a.Status.OperationState.StartedAt.Time.Before(start.Truncate(time.Second)) ||
			!slices.Contains(a.Finalizers, PreDeleteFinalizer) {
			return false
		}
		for _, r := range a.Status.Resources {
			if r.Kind == "ConfigMap" && r.Name == "settings" && r.Status == v1alpha1.SyncStatusCodeSynced {
				return true
			}
		}
		return false
	})
	if !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: %s did not sync with its ConfigMap in sync and %s within 2m: %s, finalizers %v",
			app.Name, PreDeleteFinalizer, DescribeOperation(got), got.Finalizers)
	}
	return app
}

// DeleteCascade deletes the Application with Argo CD's resources finalizer (foreground cascade), as `argocd app
// delete --cascade` does: the controller deletes what the application deployed before the Application goes.
func (a *RealHookApp) DeleteCascade(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	app := &v1alpha1.Application{}
	key := client.ObjectKey{Namespace: a.Stack.Namespace, Name: a.Name}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := a.Stack.Env.Client.Get(ctx, key, app); err != nil {
			return err
		}
		if slices.Contains(app.Finalizers, v1alpha1.ResourcesFinalizerName) {
			return nil
		}
		app.Finalizers = append(app.Finalizers, v1alpha1.ResourcesFinalizerName)
		return a.Stack.Env.Client.Update(ctx, app)
	})
	if err == nil {
		err = a.Stack.Env.Client.Delete(ctx, app)
	}
	if err != nil {
		t.Fatalf("testenv: deleting Application %s with %s: %v", a.Name, v1alpha1.ResourcesFinalizerName, err)
	}
}
