package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scenarios of issue 26 on a real Argo CD stack: states the real controllers produce in which an automatic action
// would harm a healthy sync (a sync window pausing the operation, a retry backing off, a generateName hook named anew
// by every operation).

// ScenarioRealWindowedWave: one PreSync wave with two hooks whose Pods both run until released, "slow" and "fast"
// (ttlSecondsAfterFinished: 0, so the real TTL controller deletes it the moment it completes). It returns once the
// operation is Running with both hooks recorded Running in its sync result: the moment to open a deny sync window
// (the controller then keeps the operation Running, "Sync operation blocked by sync window", and stops updating the
// hooks' results until the window ends), then Release("fast") and Release("slow").
func ScenarioRealWindowedWave(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	return ScenarioRealWindowedWaveWith(t, stack)
}

// WindowedWaveHooks are the hooks of ScenarioRealWindowedWave, for a test that commits a new revision of its app
// (RealHookApp.Update) with the same hooks.
func WindowedWaveHooks() []RealHook {
	return []RealHook{
		{Name: "slow", Hook: synccommon.HookTypePreSync, Run: PodRunsUntilReleased},
		{Name: "fast", Hook: synccommon.HookTypePreSync, TTL: TTL(0), Run: PodRunsUntilReleased},
	}
}

// ScenarioRealWindowedWaveWith is ScenarioRealWindowedWave with a sync carrying sync options (e.g. Replace=true).
func ScenarioRealWindowedWaveWith(t testing.TB, stack *RealArgoCD, options ...string) *RealHookApp {
	t.Helper()
	app := NewRealHookApp(t, stack, "windowed-wave", ConfigMapData{}, WindowedWaveHooks()...)
	start := time.Now()
	app.SyncWithOptions(t, options...)
	if got, ok := app.WaitApp(t, 2*time.Minute, func(a *v1alpha1.Application) bool {
		return OperationRunningSince(start)(a) && HookResult(a, "slow") == synccommon.OperationRunning &&
			HookResult(a, "fast") == synccommon.OperationRunning
	}); !ok {
		t.Fatalf("testenv: the sync of %s is not running both hooks after 2m: %s", app.Name, DescribeOperation(got))
	}
	return app
}

// HookResult is the phase the app's operation state records for hook name ("" when it records none).
func HookResult(app *v1alpha1.Application, name string) synccommon.OperationPhase {
	st := app.Status.OperationState
	if st == nil || st.SyncResult == nil {
		return ""
	}
	for _, r := range st.SyncResult.Resources {
		if r.HookType != "" && r.Name == name {
			return r.HookPhase
		}
	}
	return ""
}

// SyncWithRetry starts a sync as Sync does, with a retry strategy (what `argocd app sync --retry-limit N
// --retry-backoff-duration D --retry-backoff-factor 1` does): up to limit more attempts, each backoff after the
// previous one failed (factor 1, so every wait is backoff).
func (a *RealHookApp) SyncWithRetry(t testing.TB, limit int64, backoff time.Duration) {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	factor := int64(1)
	retryStrategy := &v1alpha1.RetryStrategy{Limit: limit,
		Backoff: &v1alpha1.Backoff{Duration: backoff.String(), Factor: &factor, MaxDuration: (2 * backoff).String()}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		_, err = apps.Sync(ctx, &applicationpkg.ApplicationSyncRequest{Name: &a.Name, AppNamespace: &a.Stack.Namespace,
			RetryStrategy: retryStrategy})
		if err == nil || time.Now().After(deadline) || strings.Contains(err.Error(), "another operation is already in progress") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testenv: syncing %s with retries: %v", a.Name, err)
	}
}

// MissingNamespace is the namespace ScenarioRealRetryingWave's failing sync applies a ConfigMap to; it does not exist
// until CreateMissingNamespace.
func (a *RealHookApp) MissingNamespace() string { return a.Namespace + "-missing" }

// CreateMissingNamespace creates MissingNamespace, as a person fixing the failed apply does: the next attempt of the
// sync applies the ConfigMap.
func (a *RealHookApp) CreateMissingNamespace(t testing.TB) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.MissingNamespace()}}
	if err := a.Stack.Env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("testenv: creating namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { _ = a.Stack.Env.Client.Delete(context.Background(), ns) })
}

// ScenarioRealRetryingWave: a Sync hook Job "report" (no TTL) in the same wave as a ConfigMap for MissingNamespace,
// synced with a retry strategy (limit 1, backoff, factor 1) after a first, clean sync succeeded. The apply of the
// ConfigMap fails while the hook it created in that wave runs: v2.14.21 (gitops-engine c08b0a72) fails the attempt at
// once with the hook recorded Running, v3.6.1 waits for the hook first. Between the attempts the controller keeps the
// operation Running with finishedAt set, retryCount 1 and the failed attempt's sync result. It returns once the
// operation is in that backoff, with the time the sync started. CreateMissingNamespace lets the retry succeed.
func ScenarioRealRetryingWave(t testing.TB, stack *RealArgoCD, backoff time.Duration) (*RealHookApp, time.Time) {
	t.Helper()
	app := NewRealHookApp(t, stack, "retrying-wave", ConfigMapData{}, KeptWaveHook)
	app.Sync(t)
	if got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted); !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
		t.Fatalf("testenv: the first sync of %s did not succeed within 2m: %s", app.Name, DescribeOperation(got))
	}
	app.Update(t, ConfigMapData{Elsewhere: app.MissingNamespace()}, KeptWaveHook)
	start := time.Now()
	app.SyncWithRetry(t, 1, backoff)
	if got, ok := app.WaitApp(t, 2*time.Minute, func(a *v1alpha1.Application) bool {
		return OperationRunningSince(start)(a) && Retrying(a)
	}); !ok {
		t.Fatalf("testenv: the sync of %s is not backing off before its retry after 2m: %s", app.Name, DescribeOperation(got))
	}
	return app, start
}

// Retrying holds while the app's operation waits between two attempts: Running, with finishedAt set and a retry
// count.
func Retrying(app *v1alpha1.Application) bool {
	st := app.Status.OperationState
	return st != nil && st.Phase == synccommon.OperationRunning && st.FinishedAt != nil && st.RetryCount > 0
}

// GenerateNameHookPrefix is the generateName of ScenarioRealGenerateNameFastHook's hook Job.
const GenerateNameHookPrefix = "clean-reports-"

// ScenarioRealGenerateNameFastHook is ScenarioRealFastHook with a hook Job named by generateName (as Helm charts and
// Kyverno's clean-reports hook write it): gitops-engine names it <prefix><rev7>-<phase>-<startedAt>, a new name for
// every operation. ttlSecondsAfterFinished: 0 and a Pod that exits 0 before the controller looks
// (PodSucceedsUnseen; on a real node the race loser pauses the controller for every run): on v2.14.21 the real TTL
// controller deletes the Job before the controller sees it finish, every time. It returns right after the sync starts.
func ScenarioRealGenerateNameFastHook(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	a := newRealHookApp(t, stack, "generatename-hook")
	a.write(t, ConfigMapData{}, nil)
	a.Repo.Write(t, "app/hook-clean-reports.yaml", generateNameHookManifest(GenerateNameHookPrefix, a.HostDir))
	a.Repo.Commit(t, "app "+a.Name)
	a.loseRaces(t, GenerateNameHookPrefix)
	a.playKubelet(t, func(pod *corev1.Pod) (corev1.PodPhase, bool) {
		job := pod.Labels[batchv1.JobNameLabel]
		if job == "" {
			job = pod.Labels["job-name"]
		}
		if strings.HasPrefix(job, GenerateNameHookPrefix) {
			return corev1.PodSucceeded, true
		}
		return a.decide(pod)
	})
	stack.CreateApplication(t, &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: stack.Namespace, Labels: map[string]string{RealAppLabel: a.Name}},
		Spec: v1alpha1.ApplicationSpec{
			Project:     v1alpha1.DefaultAppProjectName,
			Source:      &v1alpha1.ApplicationSource{RepoURL: a.Repo.URL, Path: "app", TargetRevision: "main"},
			Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: a.Namespace},
		},
	})
	a.Sync(t)
	return a
}

// generateNameHookManifest is a PreSync hook Job with metadata.generateName prefix, ttlSecondsAfterFinished: 0: for
// the played kubelet (hostDir empty) with a container that never runs, on a real node RealHook's container exiting 0
// at once (its starts counted in hostDir/<prefix>.runs, HookRuns(hostDir, prefix)).
func generateNameHookManifest(prefix, hostDir string) string {
	if hostDir != "" {
		job := RealHook{Name: prefix, Hook: synccommon.HookTypePreSync, TTL: TTL(0), Run: PodSucceedsUnseen}.manifest(hostDir)
		return strings.Replace(job, "  name: "+prefix+"\n", "  generateName: "+prefix+"\n", 1)
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  generateName: %s
  annotations:
    argocd.argoproj.io/hook: PreSync
spec:
  backoffLimit: 0
  ttlSecondsAfterFinished: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: ["true"]
`, prefix)
}

// ScenarioRealAutoSyncedMultiSourceLostHook: an auto-synced (syncPolicy.automated) Application with two sources from
// its git repository — "app" (the ConfigMap and a PreSync hook Job "clean-reports" with ttlSecondsAfterFinished: 0
// whose Pod exits 0 before the controller looks: PodSucceedsUnseen) and "extra" (a ConfigMap "extra-settings") — whose
// first sync the controller starts by
// itself. Its operation carries the resolved revision of each source. On v2.14.21 the TTL controller deletes the
// hook before the controller sees it finish, and the operation waits forever. It returns once the auto-sync's
// operation is Running.
func ScenarioRealAutoSyncedMultiSourceLostHook(t testing.TB, stack *RealArgoCD) *RealHookApp {
	t.Helper()
	a := newRealHookApp(t, stack, "multi-source-auto")
	a.write(t, ConfigMapData{}, []RealHook{{Name: "clean-reports", Hook: synccommon.HookTypePreSync, TTL: TTL(0), Run: PodSucceedsUnseen}})
	a.Repo.Write(t, "extra/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-settings\ndata:\n  k: v\n")
	a.Repo.Commit(t, "app "+a.Name)
	a.playKubelet(t, a.decide)
	a.loseRaces(t, "clean-reports")
	start := time.Now()
	stack.CreateApplication(t, &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: stack.Namespace, Labels: map[string]string{RealAppLabel: a.Name}},
		Spec: v1alpha1.ApplicationSpec{
			Project: v1alpha1.DefaultAppProjectName,
			Sources: v1alpha1.ApplicationSources{
				{RepoURL: a.Repo.URL, Path: "app", TargetRevision: "main"},
				{RepoURL: a.Repo.URL, Path: "extra", TargetRevision: "main"},
			},
			Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: a.Namespace},
			SyncPolicy:  &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}},
		},
	})
	if got, ok := a.WaitApp(t, 2*time.Minute, OperationRunningSince(start)); !ok {
		t.Fatalf("testenv: the controller did not auto-sync %s within 2m: %s", a.Name, DescribeOperation(got))
	}
	return a
}

// DisableAutoSync sets spec.syncPolicy.automated.enabled: false through the apiserver (Argo CD v3.1+; how an
// ApplicationSet switches auto-sync off, keeping the automated block), and fails unless the Application CRD kept the
// field (a CRD before v3.1 prunes it).
func (a *RealHookApp) DisableAutoSync(t testing.TB) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"})
	u.SetName(a.Name)
	u.SetNamespace(a.Stack.Namespace)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"syncPolicy":{"automated":{"enabled":false}}}}`))
	if err := a.Stack.Env.Client.Patch(context.Background(), u, patch); err != nil {
		t.Fatalf("testenv: switching auto-sync of %s off: %v", a.Name, err)
	}
	if err := a.Stack.Env.Client.Get(context.Background(), clientKey(a.Stack.Namespace, a.Name), u); err != nil {
		t.Fatalf("testenv: reading Application %s: %v", a.Name, err)
	}
	if enabled, found, _ := unstructured.NestedBool(u.Object, "spec", "syncPolicy", "automated", "enabled"); !found || enabled {
		t.Fatalf("testenv: the Application CRD did not keep spec.syncPolicy.automated.enabled: false (found %v, value %v)", found, enabled)
	}
}
