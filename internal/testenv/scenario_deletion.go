package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scenarios of an Application's deletion on a real Argo CD stack.

// PreDeleteFinalizer is the finalizer Argo CD v3.6 adds to an application whose manifests have a PreDelete hook
// (argo-cd v3.6.1 controller/appcontroller.go:2133-2147); it runs the PreDelete hooks before anything is deleted.
const PreDeleteFinalizer = "pre-delete-finalizer.argocd.argoproj.io"

// PreDeleteHookName is the PreDelete hook Job of ScenarioRealPreDeleteHook.
const PreDeleteHookName = "pre-delete-check"

// PreDeleteHook is a PreDelete hook Job name in git, its Pod run as run says.
func PreDeleteHook(name string, run PodRun) RealHook {
	return RealHook{Name: name, Hook: synccommon.HookType("PreDelete"), Run: run}
}

// ScenarioRealPreDeleteHook: an application whose git source holds the ConfigMap and a PreDelete hook Job
// (PreDeleteHookName, its Pod run as run says), synced. Argo CD v3.6 runs PreDelete hooks only when the application
// is deleted (not during a sync) and adds PreDeleteFinalizer (and its "/cleanup" stage) when it compares the app. It
// returns once the sync succeeded, the controller lists the ConfigMap in sync (a deletion before its cache has it can
// finish with nothing to wait for) and the Application carries PreDeleteFinalizer. DeleteCascade deletes it.
func ScenarioRealPreDeleteHook(t testing.TB, stack *RealArgoCD, run PodRun) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "pre-delete", ConfigMapData{}, PreDeleteHook(PreDeleteHookName, run))
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

// DeleteCascade deletes the Application through argocd-server's ApplicationService with cascade and foreground
// propagation (what `argocd app delete --cascade --propagation-policy foreground` does): argocd-server puts Argo CD's
// resources finalizer on it and deletes it, and the controller deletes what the application deployed before the
// Application goes.
func (a *RealHookApp) DeleteCascade(t testing.TB) {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	cascade, policy := true, "foreground"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := apps.Delete(ctx, &applicationpkg.ApplicationDeleteRequest{Name: &a.Name, AppNamespace: &a.Stack.Namespace,
		Cascade: &cascade, PropagationPolicy: &policy}); err != nil {
		t.Fatalf("testenv: deleting Application %s (cascade, foreground) through Argo CD: %v", a.Name, err)
	}
}
