package argo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// staleWindow is how long TestHardRefreshOnTheRealController watches the controller keep comparing an application
// with the commit it resolved before (its --app-resync is 10 s; the repo-server keeps a branch's resolved revision
// for --revision-cache-expiration, 3 min by default).
const staleWindow = 25 * time.Second

// v3.6.1's v1alpha1 HydrateTypeHard and AnnotationKeyHydrateTimestamp, which the v2.14 copy of the API in
// internal/argoapi does not have.
const (
	hydrateTypeHard               = "hard"
	annotationKeyHydrateTimestamp = "argocd.argoproj.io/hydrate-timestamp"
)

// refreshWatch records, from the apiserver's watch of one Application, every refresh request annotation it carried.
type refreshWatch struct {
	mu   sync.Mutex
	seen []string
}

// watchRefreshRequests watches the Application name in namespace until the test ends.
func watchRefreshRequests(t *testing.T, env *testenv.Env, namespace, name string) *refreshWatch {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := env.Dynamic.Resource(gvr).Namespace(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err)
	rw := &refreshWatch{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if v, ok := u.GetAnnotations()[v1alpha1.AnnotationKeyRefresh]; ok {
				rw.mu.Lock()
				rw.seen = append(rw.seen, v)
				rw.mu.Unlock()
			}
		}
	}()
	return rw
}

// requests returns the refresh annotation values seen, one per watch event that carried one.
func (rw *refreshWatch) requests() []string {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]string(nil), rw.seen...)
}

// reconciledAt is when the controller last compared app (zero when it has not).
func reconciledAt(app *v1alpha1.Application) time.Time {
	if app.Status.ReconciledAt == nil {
		return time.Time{}
	}
	return app.Status.ReconciledAt.Time
}

// The argocd/hard-refresh action (ApplicationService.Get with refresh=hard) on the real controllers (issue 27 item 6;
// argocd/hardrefresh_e2e_test.go keeps its dry run and permission checks, which need no controller). An Application
// tracking branch main is compared with its first commit; a second commit lands on main. For the whole stale window
// the real controller keeps comparing (reconciledAt moves) with the first commit: its periodic comparisons take the
// branch's revision from the repo-server's cache (--revision-cache-expiration). The remedy then asks argocd-server
// for a hard refresh: the server writes argocd.argoproj.io/refresh: hard (seen on the apiserver's watch), the real
// controller consumes it, and the call returns only then — by when the controller has compared the application with
// the new commit: a requested refresh resolves the revision anew (appcontroller needRefreshAppStatus:
// CompareWithLatestForceResolve), and "hard" also has the repo-server regenerate the manifests (noCache), which no
// observable state here distinguishes. The Application keeps its other annotations, and no operation starts.
// Checked to fail when the remedy asks for no refresh (the revision stays the old one) or for a normal one (the
// watch sees "normal").
func TestHardRefreshOnTheRealController(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV3, testenv.ArgoCDV2} {
		t.Run("on "+version+" a hard refresh reaches the controller, which compares with git's new commit at once", func(t *testing.T) {
			t.Parallel()
			r := row(version, fmt.Sprintf("argocd/hard-refresh (Get refresh=hard) after a new commit on the tracked branch, the controller still comparing with the old one %s later", staleWindow))
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app := testenv.NewRealHookApp(t, stack, "hard-refresh", testenv.ConfigMapData{Data: map[string]string{"revision": "1"}})
			first := app.Repo.Head(t)
			compared, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool { return a.Status.Sync.Revision == first })
			require.True(t, ok, "the controller compares the app with its first commit: sync revision %q", compared.Status.Sync.Revision)

			second := app.Update(t, testenv.ConfigMapData{Data: map[string]string{"revision": "2"}})
			committed := time.Now()
			stale, ok := app.WaitApp(t, staleWindow+controllerWindow, func(a *v1alpha1.Application) bool {
				return reconciledAt(a).After(committed.Add(time.Second)) && time.Since(committed) > staleWindow-time.Second
			})
			require.True(t, ok, "the controller keeps comparing the app (reconciledAt %s)", reconciledAt(stale))
			require.Equal(t, first, stale.Status.Sync.Revision, "a normal refresh still resolves main to the first commit %s later", staleWindow)
			r.Controller = fmt.Sprintf("new commit on main; %s later the controller still compared with the old commit (sync %s)", staleWindow, stale.Status.Sync.Status)

			annotations := stale.Annotations
			requests := watchRefreshRequests(t, env, stack.Namespace, app.Name)
			dir := t.TempDir()
			tokenFile := filepath.Join(dir, "token")
			require.NoError(t, os.WriteFile(tokenFile, []byte(stack.AdminToken(t)), 0o600))
			c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: stack.Addr, PlainText: true, TokenFile: tokenFile})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c})
			require.NoError(t, err)
			f := syncmedic.Finding{Rule: syncmedic.RuleOperationStuck, Fingerprint: "hard-refresh-real",
				Object: syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Application", Name: app.Name, App: app.Name,
					AppNamespace: stack.Namespace, Project: v1alpha1.DefaultAppProjectName},
				Remedy: syncmedic.Remedy{Action: syncmedic.ActionHardRefresh}}
			asked := time.Now()
			out, err := rem.Remediers()[syncmedic.ActionHardRefresh].Remediate(context.Background(), f, false)
			returned := time.Now()
			require.NoError(t, err, "steps: %v", out.Steps)
			require.True(t, out.Changed)

			after := app.Get(t)
			r.Syncmedic = fmt.Sprintf("the call returned once the controller had consumed the annotation: revision %s, sync %s",
				map[bool]string{true: "the new commit", false: "still the old commit"}[after.Status.Sync.Revision == second], after.Status.Sync.Status)
			require.Equal(t, second, after.Status.Sync.Revision, "the requested refresh resolved main anew: the new commit")
			require.Contains(t, requests.requests(), string(v1alpha1.RefreshTypeHard), "argocd-server wrote the hard refresh request")
			require.NotContains(t, after.Annotations, v1alpha1.AnnotationKeyRefresh, "the real controller consumed the request before the call returned")
			left := map[string]string{}
			for k, v := range after.Annotations {
				if annotations[k] != v {
					left[k] = v
				}
			}
			if version == testenv.ArgoCDV3 {
				// v3.6.1's argocd-server writes a hydrate request beside every refresh (server/application Get,
				// util/argo RefreshApp); only the source hydrator removes it, and it handles only applications with a
				// sourceHydrator, so on this one it stays: upstream behaviour, the same after `argocd app get --hard-refresh`.
				require.Equal(t, hydrateTypeHard, left[v1alpha1.AnnotationKeyHydrate], "v3.6.1 leaves its hydrate request: %v", left)
				require.Contains(t, left, annotationKeyHydrateTimestamp, "v3.6.1 leaves its hydrate request: %v", left)
				delete(left, v1alpha1.AnnotationKeyHydrate)
				delete(left, annotationKeyHydrateTimestamp)
				r.Syncmedic += "; argocd-server's hydrate request (hydrate: hard, hydrate-timestamp) stays on the Application, which has no source hydrator to consume it"
			}
			require.Empty(t, left, "nothing else is left on the Application")
			require.False(t, reconciledAt(after).Before(asked.Truncate(time.Second)), "the controller compared the app after the request (reconciledAt %s)", reconciledAt(after))
			require.Nil(t, after.Operation, "a refresh starts no operation")
			require.Nil(t, after.Status.OperationState, "a refresh starts no operation")
			require.Less(t, returned.Sub(asked), time.Minute, "the server answered")
		})
	}
}
