package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Scenarios of issue 30 on a real Argo CD stack: stuck states that are not hook-related — a sync waiting forever for
// a resource's health, a failed automated sync the controller never retries.

// HealthWaitDeployment is the Deployment of a HealthWaitApp.
const HealthWaitDeployment = "web"

// HealthWaitMessage is the operation message gitops-engine writes while the sync of a HealthWaitApp waits for its
// Deployment (setRunningPhase: the v2.14.21 engine's sync_context.go:372-389, v3.6.1's 440-489).
const HealthWaitMessage = "waiting for healthy state of apps/Deployment/" + HealthWaitDeployment

// healthWaitDeployment is the Deployment in git: sync wave -1, before the ConfigMap "settings" (wave 0), so the sync
// has two waves and gitops-engine waits for the Deployment's health before the second (a single wave would end the
// sync as soon as everything is applied). progressDeadlineSeconds is long so that it stays Progressing, not Degraded,
// for the whole test.
const healthWaitDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + HealthWaitDeployment + `
  annotations:
    argocd.argoproj.io/sync-wave: "-1"
spec:
  replicas: 1
  progressDeadlineSeconds: 3600
  selector:
    matchLabels: {app: ` + HealthWaitDeployment + `}
  template:
    metadata:
      labels: {app: ` + HealthWaitDeployment + `}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
`

// nodeHealthWaitDeployment is healthWaitDeployment on a real node: busybox's httpd serves the host directory
// hostDir/www on port 8080, where /healthz answers 404 (not Ready) until MakeReady writes the file.
func nodeHealthWaitDeployment(hostDir string) string {
	return strings.Replace(healthWaitDeployment, "        image: registry.example.com/web:1\n",
		"        image: "+NodeBusyboxImage+"\n        imagePullPolicy: Never\n"+
			"        command: [httpd, -f, -p, \"8080\", -h, "+nodeHookDir+"/www]\n"+
			"        volumeMounts:\n        - {name: www, mountPath: "+nodeHookDir+"/www}\n", 1) +
		"      terminationGracePeriodSeconds: 1\n" +
		"      volumes:\n      - name: www\n        hostPath: {path: " + strconv.Quote(filepath.Join(hostDir, "www")) + ", type: Directory}\n"
}

// HealthWaitApp is a RealHookApp whose source also has the Deployment HealthWaitDeployment (wave -1): the real
// deployment and replicaset controllers create its Pod, which is not Ready until MakeReady. With the played kubelet
// the Pod stays Pending until then, after which the kubelet reports it Running and Ready; on a real node it runs an
// HTTP server whose readiness probe fails until MakeReady writes the file it asks for (nodeHealthWaitDeployment).
type HealthWaitApp struct {
	*RealHookApp
	ready   atomic.Bool
	kubelet *Kubelet
}

// ScenarioRealHealthWait creates a HealthWaitApp and starts its sync; it returns once the operation is Running with
// HealthWaitMessage (the Deployment applied, its Pod not Ready), with the time the sync started.
func ScenarioRealHealthWait(t testing.TB, stack *RealArgoCD, name string) (*HealthWaitApp, time.Time) {
	t.Helper()
	a := &HealthWaitApp{RealHookApp: NewRealHookApp(t, stack, name, ConfigMapData{})}
	if a.Node != nil {
		if err := os.MkdirAll(filepath.Join(a.HostDir, "www"), 0o755); err != nil {
			t.Fatalf("testenv: creating the web server's host directory: %v", err)
		}
		a.Repo.Write(t, "app/deployment.yaml", nodeHealthWaitDeployment(a.HostDir))
	} else {
		a.Repo.Write(t, "app/deployment.yaml", healthWaitDeployment)
	}
	a.Repo.Commit(t, "deployment "+a.Name)
	if a.Node == nil {
		a.kubelet = stack.Env.Kubelet(t, a.Namespace, func(pod *corev1.Pod) (corev1.PodPhase, bool) {
			if pod.Labels["app"] != HealthWaitDeployment || !a.ready.Load() {
				return "", false
			}
			return corev1.PodRunning, true
		})
	}
	start := time.Now()
	a.Sync(t)
	if got, ok := a.WaitApp(t, 2*time.Minute, func(app *v1alpha1.Application) bool {
		return OperationRunningSince(start)(app) && strings.HasPrefix(app.Status.OperationState.Message, HealthWaitMessage)
	}); !ok {
		t.Fatalf("testenv: the sync of %s does not wait for its Deployment's health after 2m: %s", a.Name, DescribeOperation(got))
	}
	return a, start
}

// MakeReady has the Deployment's Pods become Ready from now on: the played kubelet reports them Running and Ready; on
// a real node their readiness probe's file appears, and the kubelet's next probe passes.
func (a *HealthWaitApp) MakeReady(t testing.TB) {
	t.Helper()
	if a.Node != nil {
		if err := os.WriteFile(filepath.Join(a.HostDir, "www", "healthz"), []byte("ok\n"), 0o644); err != nil {
			t.Fatalf("testenv: making %s ready: %v", HealthWaitDeployment, err)
		}
		return
	}
	a.ready.Store(true)
	a.kubelet.Poke()
}

// ResourceHealth is the health the application's status.resources records for the resource of kind and name
// ("" when it records none: v3 controllers do not persist it, argocd-server fills it in from the resource tree).
func ResourceHealth(app *v1alpha1.Application, kind, name string) string {
	for _, r := range app.Status.Resources {
		if r.Kind == kind && r.Name == name && r.Health != nil {
			s := string(r.Health.Status)
			if r.Health.Message != "" {
				s += ": " + r.Health.Message
			}
			return s
		}
	}
	return ""
}

// ScenarioRealAutoSyncFails: an app whose source has a second ConfigMap for a namespace that does not exist (the
// client-side dry run passes, the apply fails), set to automated sync with no retries (syncPolicy.retry limit 0,
// what `argocd app set --sync-policy automated --sync-retry-limit 0` leaves). The real controller syncs the
// revision once, fails, and then skips it ("Failed last sync attempt to …" on v3.6.1, "Failed sync attempt to …"
// on v2.14.21, in a SyncError condition). It returns once that condition is there, with the failed revision.
func ScenarioRealAutoSyncFails(t testing.TB, stack *RealArgoCD, name string) (*RealHookApp, string) {
	t.Helper()
	app := NewRealHookApp(t, stack, name, ConfigMapData{Elsewhere: uniqueName("absent")})
	revision := app.Repo.Head(t)
	app.SetAutomated(t)
	if got, ok := app.WaitApp(t, 3*time.Minute, func(a *v1alpha1.Application) bool {
		return OperationCompleted(a) && AutoSyncSkipped(a) != ""
	}); !ok {
		t.Fatalf("testenv: the automated sync of %s did not fail and get skipped within 3m: %s; conditions %v", app.Name, DescribeOperation(got), got.Status.Conditions)
	}
	return app, revision
}

// SetAutomated turns on automated sync with no retries, through the apiserver (what applying the Application with
// syncPolicy.automated and retry.limit 0 does).
func (a *RealHookApp) SetAutomated(t testing.TB) {
	t.Helper()
	app := &v1alpha1.Application{}
	app.Name, app.Namespace = a.Name, a.Stack.Namespace
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"syncPolicy":{"automated":{},"retry":{"limit":0}}}}`))
	if err := a.Stack.Env.Client.Patch(context.Background(), app, patch); err != nil {
		t.Fatalf("testenv: turning on automated sync of %s: %v", a.Name, err)
	}
}

// FixAutoSync commits the app's source without the ConfigMap for the absent namespace and with a changed "settings"
// (so the application is OutOfSync at the new revision and automated sync has something to apply: a fix that only
// removed the bad ConfigMap would leave it Synced, with no new operation), and asks argocd-server for a hard refresh
// (what a Git webhook or `argocd app get --hard-refresh` does: the repo-server otherwise answers from its cached
// references for up to --revision-cache-expiration, 3m by default); it returns the new revision.
func (a *RealHookApp) FixAutoSync(t testing.TB) string {
	t.Helper()
	rev := a.Update(t, ConfigMapData{Data: map[string]string{"revision": "2"}})
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hard := string(v1alpha1.RefreshTypeHard)
	if _, err := apps.Get(ctx, &applicationpkg.ApplicationQuery{Name: &a.Name, AppNamespace: &a.Stack.Namespace, Refresh: &hard}); err != nil {
		t.Fatalf("testenv: hard refresh of %s: %v", a.Name, err)
	}
	return rev
}

// AutoSyncSkipped returns the message of the SyncError condition in which the controller says it skips a revision
// whose last sync failed ("" when there is none).
func AutoSyncSkipped(app *v1alpha1.Application) string {
	for _, c := range app.Status.Conditions {
		if c.Type == v1alpha1.ApplicationConditionSyncError &&
			(strings.HasPrefix(c.Message, "Failed last sync attempt to ") || strings.HasPrefix(c.Message, "Failed sync attempt to ")) {
			return c.Message
		}
	}
	return ""
}

// ClearOperation empties the Application's .operation through the Kubernetes API, leaving status.operationState as
// it is: what people do by hand to a sync that looks stuck (`kubectl patch application APP --type merge -p
// '{"operation":null}'`, the workaround passed around in argo-cd #17155, #18613, #23765). No controller of the tested
// versions writes that state: the application-controller clears .operation only in the patch that records a
// completed phase (setOperationState).
func (a *RealHookApp) ClearOperation(t testing.TB) {
	t.Helper()
	obj := &v1alpha1.Application{}
	obj.Name, obj.Namespace = a.Name, a.Stack.Namespace
	// hand-written state: this is the person's patch of argo-cd #17155 (no controller clears .operation of a
	// Running operation); the operation state stays what the real controller wrote.
	if err := a.Stack.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(`{"operation":null}`))); err != nil {
		t.Fatalf("testenv: clearing .operation of %s: %v", a.Name, err)
	}
}

// HardRefresh asks argocd-server for a hard refresh of the app (what `argocd app get --hard-refresh` does) and waits
// until the controller has reconciled it again (status.reconciledAt moves), up to a minute.
func (a *RealHookApp) HardRefresh(t testing.TB) {
	t.Helper()
	before := a.Get(t).Status.ReconciledAt
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	hard := string(v1alpha1.RefreshTypeHard)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := apps.Get(ctx, &applicationpkg.ApplicationQuery{Name: &a.Name, AppNamespace: &a.Stack.Namespace, Refresh: &hard}); err != nil {
		t.Fatalf("testenv: hard refresh of %s: %v", a.Name, err)
	}
	if got, ok := a.WaitApp(t, time.Minute, func(app *v1alpha1.Application) bool {
		r := app.Status.ReconciledAt
		return r != nil && (before == nil || r.After(before.Time)) && app.Annotations[v1alpha1.AnnotationKeyRefresh] == ""
	}); !ok {
		t.Fatalf("testenv: %s not reconciled within 1m of a hard refresh: reconciledAt %v", a.Name, got.Status.ReconciledAt)
	}
}

// TryTerminate asks argocd-server to terminate the app's operation and returns its answer.
func (a *RealHookApp) TryTerminate(t testing.TB) error {
	t.Helper()
	apps := a.Stack.Applications(t, a.Stack.cachedAdminToken(t))
	_, err := apps.TerminateOperation(context.Background(), &applicationpkg.OperationTerminateRequest{Name: &a.Name, AppNamespace: &a.Stack.Namespace})
	return err
}
