package testenv

import (
	"context"
	"encoding/json"
	upstream "github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Revision is the commit SHA the harness's Applications target: Argo CD's Sync resolves a full SHA without asking
// the repo-server, which the tests do not run.
const Revision = "6a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"

// NewApplication returns an Application in the control-plane namespace, project default, destined for
// https://kubernetes.default.svc (the test apiserver) and namespace destNamespace, with a git source at Revision.
func (a *ArgoCDServer) NewApplication(name, destNamespace string) *v1alpha1.Application {
	return &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace},
		Spec: v1alpha1.ApplicationSpec{
			Project: v1alpha1.DefaultAppProjectName,
			Source: &v1alpha1.ApplicationSource{RepoURL: "https://git.testenv.invalid/apps.git", Path: name,
				TargetRevision: Revision},
			Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr,
				Namespace: destNamespace},
		},
	}
}

// CreateApplication creates app (see NewApplication) in the apiserver and returns it as stored.
func (a *ArgoCDServer) CreateApplication(t testing.TB, app *v1alpha1.Application) *v1alpha1.Application {
	t.Helper()
	if app.Namespace == "" {
		app.Namespace = a.Namespace
	}
	if err := a.Env.Client.Create(context.Background(), app); err != nil {
		t.Fatalf("testenv: creating Application %s: %v", app.Name, err)
	}
	a.waitVisible(t, app.Name)
	return app
}

// waitVisible waits until the server's application informer has app name. Several Argo CD calls (PatchResource,
// ResourceTree, List) read the informer and answer PermissionDenied for an application they do not know yet, to
// hide its existence: without this wait such a call right after the create fails at random.
func (a *ArgoCDServer) waitVisible(t testing.TB, name string) {
	t.Helper()
	a.adminMu.Lock()
	if a.adminToken == "" && !a.disableAuth {
		a.adminToken = a.AdminToken(t)
	}
	token := a.adminToken
	a.adminMu.Unlock()
	apps := a.Applications(t, token)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		list, err := apps.List(ctx, &applicationpkg.ApplicationQuery{Name: &name, AppNamespace: &a.Namespace})
		cancel()
		if err == nil && len(list.Items) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: argocd-server does not see Application %s after 30s (last error: %v)", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// UpdateApplication applies mutate to the live Application and writes it back, retrying on conflicts (the
// Application CRD has no status subresource: the controller writes status with ordinary updates, as this does).
func (a *ArgoCDServer) UpdateApplication(t testing.TB, name string, mutate func(*v1alpha1.Application)) *v1alpha1.Application {
	t.Helper()
	var app v1alpha1.Application
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := a.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: a.Namespace, Name: name}, &app); err != nil {
			return err
		}
		mutate(&app)
		// hand-written state: the helper (UpdateApplication) writes the whole Application, status included (the CRD has
		// no status subresource); callers say why.
		return a.Env.Client.Update(context.Background(), &app)
	})
	if err != nil {
		t.Fatalf("testenv: updating Application %s: %v", name, err)
	}
	return &app
}

// SetOperationState writes the Application's operation state the way the application controller does: a
// running operation keeps its request in .operation; a completed one (Succeeded, Failed, Error) clears it.
//
// hand-written state: for the in-process argocd-server (ArgoCD), which runs no application-controller. Each caller
// says which operation state it writes and why no controller gives it in that test (usually: the test is about
// argocd-server's API or watch, or about a fault, and the real controller's version of the state is proven in
// internal/conformance/argo). Never on a RealArgoCD stack: its controller owns the operation state.
func (a *ArgoCDServer) SetOperationState(t testing.TB, name string, state *v1alpha1.OperationState) *v1alpha1.Application {
	t.Helper()
	return a.UpdateApplication(t, name, func(app *v1alpha1.Application) {
		app.Status.OperationState = state.DeepCopy()
		if state.Phase.Completed() {
			app.Operation = nil
		} else {
			app.Operation = state.Operation.DeepCopy()
		}
	})
}

// SetResourceTree stores the Application's resource tree in this server's Redis cache with Argo CD's own cache
// code, as the application controller does; ResourceTree, GetResource and PatchResource read it.
//
// hand-written state: the controller's cache, for an argocd-server with no application-controller (see
// SetOperationState); callers say why.
func (a *ArgoCDServer) SetResourceTree(t testing.TB, name string, tree *v1alpha1.ApplicationTree) {
	t.Helper()
	if err := a.cache.SetAppResourcesTree(name, ConvertArgo[upstream.ApplicationTree](tree)); err != nil {
		t.Fatalf("testenv: caching the resource tree of %s: %v", name, err)
	}
}

// SetManagedResources stores the Application's managed resources (live/target diffs) in the cache.
//
// hand-written state: the controller's cache, for an argocd-server with no application-controller (see
// SetOperationState); callers say why.
func (a *ArgoCDServer) SetManagedResources(t testing.TB, name string, resources []*v1alpha1.ResourceDiff) {
	t.Helper()
	if err := a.cache.SetAppManagedResources(name, *ConvertArgo[[]*upstream.ResourceDiff](resources)); err != nil {
		t.Fatalf("testenv: caching the managed resources of %s: %v", name, err)
	}
}

// SetResources records live objects (read back from the apiserver, so they carry UIDs) as the Application's
// resources: the resource tree and managed resources in the cache, and status.resources on the Application.
// Objects annotated as Argo CD or Helm hooks are marked as hooks.
//
// hand-written state: the controller's cache and status.resources, for an argocd-server with no
// application-controller (see SetOperationState); callers say why.
func (a *ArgoCDServer) SetResources(t testing.TB, name string, objs ...client.Object) {
	t.Helper()
	tree := &v1alpha1.ApplicationTree{}
	var diffs []*v1alpha1.ResourceDiff
	var statuses []v1alpha1.ResourceStatus
	for _, obj := range objs {
		node, err := ResourceNode(obj)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		live, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		ref := node.ResourceRef
		hook := isHook(obj)
		tree.Nodes = append(tree.Nodes, node)
		diffs = append(diffs, &v1alpha1.ResourceDiff{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace,
			Name: ref.Name, LiveState: string(live), TargetState: string(live), Hook: hook})
		statuses = append(statuses, v1alpha1.ResourceStatus{Group: ref.Group, Version: ref.Version, Kind: ref.Kind,
			Namespace: ref.Namespace, Name: ref.Name, Status: v1alpha1.SyncStatusCodeSynced, Hook: hook})
	}
	// hand-written state: SetResources' tree in the cache; callers say why.
	a.SetResourceTree(t, name, tree)
	// hand-written state: SetResources' managed resources in the cache; callers say why.
	a.SetManagedResources(t, name, diffs)
	// hand-written state: SetResources' status.resources; callers say why.
	a.UpdateApplication(t, name, func(app *v1alpha1.Application) { app.Status.Resources = statuses })
}

// ResourceNode describes a live object as a node of an Argo CD resource tree. The object must have a UID (read it
// from the apiserver first); its kind comes from its TypeMeta or, for typed objects, from Scheme().
func ResourceNode(obj client.Object) (v1alpha1.ResourceNode, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, Scheme()); err != nil {
			return v1alpha1.ResourceNode{}, err
		}
	}
	return v1alpha1.ResourceNode{
		ResourceRef: v1alpha1.ResourceRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())},
		ResourceVersion: obj.GetResourceVersion(),
		CreatedAt:       ptrTime(obj.GetCreationTimestamp()),
	}, nil
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func isHook(obj client.Object) bool {
	ann := obj.GetAnnotations()
	_, argoHook := ann[synccommon.AnnotationKeyHook]
	_, helmHook := ann["helm.sh/hook"]
	return argoHook || helmHook
}
