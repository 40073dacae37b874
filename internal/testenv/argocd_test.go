package testenv

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
)

func TestArgoCDWithoutAuthListsApplications(t *testing.T) {
	env := Kube(t)
	argo := ArgoCD(t, env, ArgoCDOptions{DisableAuth: true})
	argo.CreateApplication(t, argo.NewApplication("guestbook", env.Namespace(t)))

	apps := argo.Applications(t, "")
	require.Eventually(t, func() bool {
		list, err := apps.List(context.Background(), &applicationpkg.ApplicationQuery{})
		return err == nil && len(list.Items) == 1 && list.Items[0].Name == "guestbook"
	}, defaultWait, pollEvery, "the server's informer should list the new Application")
}

func TestArgoCDResourcesAndRBAC(t *testing.T) {
	env := Kube(t)
	argo := ArgoCD(t, env, ArgoCDOptions{
		Accounts: []string{"viewer", "fixer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow",
			"p, role:fixer, applications, get, */*, allow",
			"p, role:fixer, applications, update/*, */*, allow",
			"g, viewer, role:viewer",
			"g, fixer, role:fixer",
		},
	})
	ns := env.Namespace(t)
	// hand-written state: a Complete hook Job on the harness's apiserver, which runs no Job controller: the test is
	// about argocd-server's GetResource and RBAC.
	job := CreateCompletedJob(t, env, HookJob{Namespace: ns, App: "db"}, false)
	argo.CreateApplication(t, argo.NewApplication("db", ns))
	// hand-written state: the app's resource tree, which the in-process argocd-server's RBAC checks read; it runs no
	// application-controller, and this test is about that server's API.
	argo.SetResources(t, "db", job)
	viewer := argo.Applications(t, argo.Token(t, "viewer"))
	fixer := argo.Applications(t, argo.Token(t, "fixer"))
	ctx := context.Background()
	jobRequest := &applicationpkg.ApplicationResourceRequest{Name: ptr.To("db"), Namespace: ptr.To(ns),
		ResourceName: ptr.To(job.Name), Group: ptr.To("batch"), Version: ptr.To("v1"), Kind: ptr.To("Job")}
	patch := func(body string) *applicationpkg.ApplicationResourcePatchRequest {
		return &applicationpkg.ApplicationResourcePatchRequest{Name: ptr.To("db"), Namespace: ptr.To(ns),
			ResourceName: ptr.To(job.Name), Group: ptr.To("batch"), Version: ptr.To("v1"), Kind: ptr.To("Job"),
			Patch: ptr.To(body), PatchType: ptr.To("application/merge-patch+json")}
	}

	t.Run("admin lists the application through the v2 API client", func(t *testing.T) {
		list, err := argo.Applications(t, argo.AdminToken(t)).List(ctx, &applicationpkg.ApplicationQuery{})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
	})

	t.Run("GetResource returns the live Job from the destination cluster", func(t *testing.T) {
		res, err := viewer.GetResource(ctx, jobRequest)
		require.NoError(t, err)
		var live batchv1.Job
		require.NoError(t, json.Unmarshal([]byte(res.GetManifest()), &live))
		require.Equal(t, job.UID, live.UID)
		require.Equal(t, int32(1), live.Status.Succeeded)
	})

	t.Run("PatchResource is refused for an account without update", func(t *testing.T) {
		_, err := viewer.PatchResource(ctx, patch(`{"metadata":{"annotations":{"syncmedic.io/test":"viewer"}}}`))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "got %v", err)
	})

	t.Run("PatchResource changes the live Job for an account with update", func(t *testing.T) {
		_, err := fixer.PatchResource(ctx, patch(`{"metadata":{"annotations":{"syncmedic.io/test":"fixer"}}}`))
		require.NoError(t, err)
		require.Equal(t, "fixer", GetJob(t, env, ns, job.Name).Annotations["syncmedic.io/test"])
	})
}
