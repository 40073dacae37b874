package argocd_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	appclientset "github.com/argoproj/argo-cd/v2/pkg/client/clientset/versioned"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// refreshController stands in for the application controller's part in a hard refresh: when an Application carries
// argocd.argoproj.io/refresh, it records the Application as it saw it and then removes the refresh (and hydrate)
// annotations with a merge patch, as the controller's persistAppStatus does once the app is reconciled.
type refreshController struct {
	mu   sync.Mutex
	seen []*v1alpha1.Application
}

func playRefreshController(t *testing.T, argo *testenv.ArgoCDServer, appName string) *refreshController {
	apps, err := appclientset.NewForConfig(argo.Env.Config)
	require.NoError(t, err)
	cur, err := getApp(argo, appName)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := apps.ArgoprojV1alpha1().Applications(argo.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: cur.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", appName).String()})
	require.NoError(t, err)
	rc := &refreshController{}
	clear := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationKeyRefresh + `":null,"` + v1alpha1.AnnotationKeyHydrate + `":null}}}`)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			app, ok := testenv.ArgoApplication(ev.Object)
			if !ok {
				continue
			}
			if _, requested := app.Annotations[v1alpha1.AnnotationKeyRefresh]; !requested {
				continue
			}
			rc.mu.Lock()
			rc.seen = append(rc.seen, app.DeepCopy())
			rc.mu.Unlock()
			// hand-written state: the refresh annotation removed, as the controller's persistAppStatus does once it has
			// reconciled: the in-process argocd-server runs no application-controller, and hard refresh is tested
			// against no real controller yet (issue 27 item 6).
			if _, err := apps.ArgoprojV1alpha1().Applications(app.Namespace).Patch(ctx, app.Name, types.MergePatchType, clear, metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("refresh controller stand-in: clearing the annotation: %v", err)
			}
		}
	}()
	return rc
}

// requests returns the Applications seen carrying a refresh request.
func (rc *refreshController) requests() []*v1alpha1.Application {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*v1alpha1.Application(nil), rc.seen...)
}

// withoutMeta is an Application's spec, status, labels, finalizers and annotations, for comparing what a refresh
// request changed (the apiserver moves resourceVersion and managedFields on any write).
func withoutMeta(t *testing.T, a *v1alpha1.Application) string {
	b, err := json.Marshal(struct {
		Labels, Annotations map[string]string
		Finalizers          []string
		Spec                v1alpha1.ApplicationSpec
		Status              v1alpha1.ApplicationStatus
		Operation           *v1alpha1.Operation
	}{a.Labels, a.Annotations, a.Finalizers, a.Spec, a.Status, a.Operation})
	require.NoError(t, err)
	return string(b)
}

// TestHardRefreshThroughTheAPI: the hard-refresh remedy is ApplicationService.Get with refresh=hard, which needs only
// `applications, get` (server/application Get enforces ActionGet); argocd-server patches the refresh annotation onto
// the Application and waits until the application controller has removed it.
func TestHardRefreshThroughTheAPI(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind", "viewer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer",
			"p, role:blind, projects, get, *, allow", "g, blind, role:blind",
		},
	})
	const appName = "refreshed"
	argo.CreateApplication(t, argo.NewApplication(appName, env.Namespace(t)))
	// hand-written state: a user's annotation on the Application; the Update writes back the status it read (the CRD
	// has no status subresource), which no controller changes here (the in-process argocd-server runs no
	// application-controller).
	argo.UpdateApplication(t, appName, func(a *v1alpha1.Application) {
		a.Annotations = map[string]string{"team": "shop"} // an annotation of the user's, which must survive
	})
	// hand-written state: playRefreshController stands in for the controller's part in a hard refresh (the in-process
	// argocd-server runs no application-controller).
	controller := playRefreshController(t, argo, appName)
	f := syncmedic.Finding{Rule: syncmedic.RuleOperationStuck, Fingerprint: "hard-refresh-e2e",
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Application", Name: appName, App: appName, AppNamespace: argo.Namespace, Project: "default"},
		Remedy: syncmedic.Remedy{Action: syncmedic.ActionHardRefresh, AutoSafe: true}}
	remediate := func(c argocd.Client, dryRun bool) (syncmedic.Outcome, error) {
		r, err := argocd.NewRemedies(argocd.RemedierOptions{Client: c})
		require.NoError(t, err)
		return r.Remediers()[syncmedic.ActionHardRefresh].Remediate(context.Background(), f, dryRun)
	}
	before := snapshotObjects(t, argo, appName, "", "")
	orig, err := getApp(argo, appName)
	require.NoError(t, err)

	t.Run("dry-run makes no call, changes nothing and says what it would do", func(t *testing.T) {
		// Connected through a proxy that is then shut: any API call would fail.
		proxy := testenv.NewProxy(t, argo.Addr)
		c := dial(t, proxy.Addr(), argo.AdminToken(t))
		proxy.Down()
		out, err := remediate(c, true)
		require.NoError(t, err)
		require.True(t, out.DryRun)
		require.False(t, out.Changed)
		require.Equal(t, []string{"Get app=" + argo.Namespace + "/" + appName + " refresh=hard"}, out.Steps)
		require.Equal(t, before, snapshotObjects(t, argo, appName, "", ""), "the Application is byte-for-byte unchanged")
		require.Empty(t, controller.requests(), "no refresh was requested")
	})

	t.Run("an account without applications, get is refused cleanly and nothing changes", func(t *testing.T) {
		_, err := remediate(dial(t, argo.Addr, argo.Token(t, "blind")), false)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err), "a permission error must not be retried: %v", err)
		require.ErrorContains(t, err, "permission denied")
		require.ErrorContains(t, err, "applications, get")
		require.Equal(t, before, snapshotObjects(t, argo, appName, "", ""))
		require.Empty(t, controller.requests())
	})

	t.Run("with get, the server sets the hard refresh annotation and returns once the controller cleared it", func(t *testing.T) {
		out, err := remediate(dial(t, argo.Addr, argo.Token(t, "viewer")), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.True(t, out.Changed)
		reqs := controller.requests()
		require.Len(t, reqs, 1, "exactly one refresh request")
		seen := reqs[0]
		require.Equal(t, string(v1alpha1.RefreshTypeHard), seen.Annotations[v1alpha1.AnnotationKeyRefresh])
		// argocd-server's RefreshApp (util/argo) writes the refresh request together with a hydrate request; the
		// controller clears both. Nothing else on the Application changes.
		want := orig.DeepCopy()
		want.Annotations[v1alpha1.AnnotationKeyRefresh] = string(v1alpha1.RefreshTypeHard)
		want.Annotations[v1alpha1.AnnotationKeyHydrate] = string(v1alpha1.HydrateTypeNormal)
		require.Equal(t, withoutMeta(t, want), withoutMeta(t, seen), "only the refresh request was added")

		after, err := getApp(argo, appName)
		require.NoError(t, err)
		require.NotContains(t, after.Annotations, v1alpha1.AnnotationKeyRefresh, "the remedy returned after the controller had refreshed")
		require.Equal(t, withoutMeta(t, orig), withoutMeta(t, after), "the user's annotation survives; the request is gone")
	})
}
