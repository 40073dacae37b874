package flux_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// requestThreshold is serve's --reconcile-request-threshold in the scenario below.
const requestThreshold = 5 * time.Second

// Issue 49 item 6 on the real kustomize-controller v1.7.3: Kustomization "app" (timeout 30s) is Ready; kustomize-
// controller is frozen (SIGSTOP) between two runs and a reconcile request is written on app, as `flux reconcile
// kustomization` writes it. The request stays unhandled (status.lastHandledReconcileAt keeps the older value), and
// serve (threshold 5s) announces flux/reconcile-request-not-handled on app past the timeout plus the threshold; scan
// --kubeconfig reports it too. Resumed, kustomize-controller handles the request and the incident resolves. Near
// misses: "twin", whose request (written before the freeze) the controller handled within seconds, and "paused",
// suspended, with a request written during the freeze: both evaluated, neither reported.
func TestKustomizationRequestNotHandledIsAnnounced(t *testing.T) {
	stack, ns, git := kustomizeStack(t)
	t.Parallel()
	row := &conformance.Row{Version: kustomizeV1, Scenario: "reconcile request written while kustomize-controller is frozen (SIGSTOP); timeout 30s; a request handled before the freeze; a suspended twin with a request (serve, threshold 5s)"}
	defer record(t, row)
	git.Repo.Write(t, "app/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n")
	git.Repo.Commit(t, "first")
	fluxreal.CreateGitRepository(t, stack.Env, ns, git, 5*time.Second)
	d := startServe(t, stack, ns, notifyPolicy, "--reconcile-request-threshold", requestThreshold.String())
	from := d.logLen()
	for _, name := range []string{"app", "twin", "paused"} {
		stack.CreateKustomization(t, ns, fluxreal.Kustomization{Name: name, Path: "./app", Timeout: 30 * time.Second, TargetNamespace: ns})
	}
	for _, name := range []string{"app", "twin", "paused"} {
		stack.WaitForKustomization(t, ns, name, 90*time.Second, "Ready", fluxreal.KustomizationReady)
	}
	stack.PatchKustomization(t, ns, "paused", map[string]any{"suspend": true})

	handled := func(value string) func(*unstructured.Unstructured) bool {
		return func(u *unstructured.Unstructured) bool {
			h, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
			return h == value
		}
	}
	twinReq := request(t, stack, ns, "twin")
	stack.WaitForKustomization(t, ns, "twin", 60*time.Second, "the request handled", handled(twinReq))
	tookTwin := time.Since(mustParse(t, twinReq))

	// Freeze it between two runs (a run first marks Ready=Unknown "Reconciliation in progress": frozen then, it
	// would be a health check in progress forever, another rule's state).
	resume := pauseKustomizeControllerWhenIdle(t, stack, ns, func(u *unstructured.Unstructured) bool {
		ready, _, _ := fluxreal.KustomizationCondition(u, "Ready")
		return ready == "True"
	}, "app", "twin", "paused")
	defer resume()
	before, _, _ := unstructured.NestedString(stack.GetKustomization(t, ns, "app").Object, "status", "lastHandledReconcileAt")
	appReq := request(t, stack, ns, "app")
	pausedReq := request(t, stack, ns, "paused")

	root := announcedOnce(t, d.slack, syncmedic.RuleReconcileRequestNotHandled, "app", 90*time.Second, "flux/reconcile-request-not-handled announced on Slack")
	waited := time.Since(mustParse(t, appReq))
	require.GreaterOrEqual(t, waited, 30*time.Second+requestThreshold, "not before the timeout plus the threshold")
	require.Contains(t, root.Text, "Kustomization "+ns+"/app")
	onlyAnnouncement(t, d, root)
	app := stack.GetKustomization(t, ns, "app")
	require.False(t, handled(appReq)(app), "the request is still unhandled while the controller is frozen")
	f, ok := d.scanFinding(t, syncmedic.RuleReconcileRequestNotHandled, ns, "app", "--reconcile-request-threshold", requestThreshold.String())
	require.True(t, ok, "scan --kubeconfig reports it too")
	require.Empty(t, f.Remedy.Action, "notify only")
	require.Equal(t, syncmedic.Evidence{Field: "metadata.annotations[reconcile.fluxcd.io/requestedAt]", Value: appReq, Since: f.Evidence[0].Since}, f.Evidence[0])
	require.Equal(t, "status.lastHandledReconcileAt", f.Evidence[1].Field)
	require.Equal(t, orNone(before), f.Evidence[1].Value)
	require.False(t, handled(pausedReq)(stack.GetKustomization(t, ns, "paused")), "the suspended twin's request is pending too")
	evalsTwin := d.lookedAtKustomization(t, ns, "twin", from)
	evalsPaused := d.lookedAtKustomization(t, ns, "paused", from)

	resume()
	stack.WaitForKustomization(t, ns, "app", 90*time.Second, "the request handled once resumed", handled(appReq))
	waitThread(t, d, root, "resolved", "the incident resolves")
	onlyAnnouncement(t, d, root)
	require.Less(t, tookTwin, 30*time.Second+requestThreshold, "the handled request was handled within the bound")
	row.Controller = fmt.Sprintf("frozen: requestedAt kept, lastHandledReconcileAt kept (%s) ≥ the timeout plus the threshold; resumed: handled; a request before the freeze: handled within the bound", handledText(before))
	row.Syncmedic = fmt.Sprintf("flux/reconcile-request-not-handled on Kustomization app (notify; scan too), resolved once handled; handled request: no finding (evaluated: %t); suspended with a request: no finding (evaluated: %t)", evalsTwin > 0, evalsPaused > 0)
}

// request writes reconcile.fluxcd.io/requestedAt on Kustomization namespace/name as `flux reconcile kustomization`
// does (the current time, RFC 3339 with nanoseconds) and returns the value.
func request(t *testing.T, stack *fluxreal.Stack, namespace, name string) string {
	t.Helper()
	v := time.Now().UTC().Format(time.RFC3339Nano)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fluxreal.KustomizationGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, v)
	require.NoError(t, stack.Env.Client.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(patch))))
	return v
}

func mustParse(t *testing.T, v string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, v)
	require.NoError(t, err)
	return at
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// handledText is what the row says of lastHandledReconcileAt before the request: whether the controller had handled
// one (the value itself is a time of the run).
func handledText(v string) string {
	if v == "" {
		return "none"
	}
	return "an earlier request"
}

// Issue 49 item 6 on the real helm-controller v1.4.3: HelmRelease "cache" (spec.timeout 10s) is installed and
// Ready; helm-controller is frozen (SIGSTOP) between two runs and a reconcile request is written, as `flux
// reconcile helmrelease` writes it. The request stays unhandled, and serve (threshold 5s) announces
// flux/reconcile-request-not-handled on cache past twice the timeout plus the threshold. Resumed, helm-controller
// handles it and the incident resolves. Near miss: "twin", whose request the running controller handled, is
// evaluated and not reported.
func TestReleaseRequestNotHandledIsAnnounced(t *testing.T) {
	env := testenv.KubePrivate(t)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV1})
	t.Parallel()
	const timeout = 10 * time.Second
	row := &conformance.Row{Version: helmV1, Scenario: "reconcile request written while helm-controller is frozen (SIGSTOP); spec.timeout 10s; a request handled before the freeze (serve, threshold 5s)"}
	defer record(t, row)
	repo.Publish(t, fluxreal.ConfigMapChart("cache", "1.0.0"))
	for _, name := range []string{"cache", "twin"} {
		stack.CreateRelease(t, ns, fluxreal.Release{Name: name, Chart: "cache", Version: "1.0.0", Timeout: timeout})
	}
	for _, name := range []string{"cache", "twin"} {
		stack.WaitFor(t, ns, name, 120*time.Second, "Ready", fluxreal.IsReady)
	}
	d := startServe(t, stack, ns, notifyPolicy, "--reconcile-request-threshold", requestThreshold.String())
	from := d.logLen()
	handled := func(value string) func(*helmv2.HelmRelease) bool {
		return func(hr *helmv2.HelmRelease) bool { return hr.Status.LastHandledReconcileAt == value }
	}
	twinReq := requestRelease(t, stack, ns, "twin")
	stack.WaitFor(t, ns, "twin", 60*time.Second, "the request handled", handled(twinReq))

	// Freeze it between two runs: each run first marks the release Ready=Unknown; frozen then, it would be an
	// action in progress forever, another rule's state.
	var resume func()
	for attempt := 1; ; attempt++ {
		for _, name := range []string{"cache", "twin"} {
			stack.WaitFor(t, ns, name, 90*time.Second, "Ready before the freeze", fluxreal.IsReady)
		}
		resume = stack.PauseHelmController(t)
		time.Sleep(time.Second)
		if fluxreal.IsReady(stack.Get(t, ns, "cache")) && fluxreal.IsReady(stack.Get(t, ns, "twin")) {
			break
		}
		resume()
		require.Less(t, attempt, 10, "helm-controller was never frozen between two runs")
	}
	defer resume()
	before := stack.Get(t, ns, "cache").Status.LastHandledReconcileAt
	req := requestRelease(t, stack, ns, "cache")

	root := announcedOnce(t, d.slack, syncmedic.RuleReconcileRequestNotHandled, "cache", 90*time.Second, "flux/reconcile-request-not-handled announced on Slack")
	require.GreaterOrEqual(t, time.Since(mustParse(t, req)), 2*timeout+requestThreshold, "not before twice the timeout plus the threshold")
	require.Contains(t, root.Text, "HelmRelease "+ns+"/cache")
	require.False(t, handled(req)(stack.Get(t, ns, "cache")), "the request is still unhandled while the controller is frozen")
	onlyAnnouncement(t, d, root)
	evals := d.lookedAt(t, ns, "twin", from)

	resume()
	stack.WaitFor(t, ns, "cache", 90*time.Second, "the request handled once resumed", handled(req))
	waitThread(t, d, root, "resolved", "the incident resolves")
	onlyAnnouncement(t, d, root)
	row.Controller = fmt.Sprintf("frozen: requestedAt kept, lastHandledReconcileAt kept (%s) ≥ twice the timeout plus the threshold; resumed: handled; a request before the freeze: handled", handledText(before))
	row.Syncmedic = fmt.Sprintf("flux/reconcile-request-not-handled on HelmRelease cache (notify), resolved once handled; handled request: no finding (evaluated: %t)", evals > 0)
}

// requestRelease writes reconcile.fluxcd.io/requestedAt on HelmRelease namespace/name as `flux reconcile
// helmrelease` does and returns the value.
func requestRelease(t *testing.T, stack *fluxreal.Stack, namespace, name string) string {
	t.Helper()
	v := time.Now().UTC().Format(time.RFC3339Nano)
	hr := &helmv2.HelmRelease{}
	hr.Namespace, hr.Name = namespace, name
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, v)
	require.NoError(t, stack.Env.Client.Patch(context.Background(), hr, client.RawPatch(types.MergePatchType, []byte(patch))))
	return v
}
