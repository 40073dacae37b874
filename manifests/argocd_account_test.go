package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// componentConfigMap reads a ConfigMap file of manifests/components/argocd-account (which manifests/argocd-cmp
// includes).
func componentConfigMap(t *testing.T, file string) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join("components", "argocd-account", file))), &cm))
	return cm.Data
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestTheSyncmedicAccountInTheRealArgoCDServer gives a real argocd-server the account and policy lines of
// manifests/components/argocd-account (with project "default" as the one where remedies are allowed) and the README's
// token-issuer role, has a non-admin account holding that role issue syncmedic's token, and calls the API with it
// the way syncmedic does.
func TestTheSyncmedicAccountInTheRealArgoCDServer(t *testing.T) {
	var accounts []string
	for k, v := range componentConfigMap(t, "argocd-cm.yaml") {
		if name, ok := strings.CutPrefix(k, "accounts."); ok && v == "apiKey" {
			accounts = append(accounts, name)
		}
	}
	require.Equal(t, []string{"syncmedic"}, accounts)
	csv := componentConfigMap(t, "argocd-rbac-cm.yaml")["policy.syncmedic.csv"]
	policy := strings.Split(strings.TrimSpace(strings.ReplaceAll(csv, "remediable/", v1alpha1.DefaultAppProjectName+"/")), "\n")

	// The README's issuer role, held by the non-admin account "platform" (an SSO group in the README).
	issuer := strings.ReplaceAll(readmeBlock(t, "csv", "role:syncmedic-token-issuer"), "g, my-org:platform-team,", "g, platform,")
	policy = append(policy, strings.Split(strings.TrimSpace(issuer), "\n")...)

	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{Accounts: append(accounts, "platform"), Policy: policy})
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.AppProject{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: argo.Namespace},
		Spec: v1alpha1.AppProjectSpec{SourceRepos: []string{"*"},
			Destinations: []v1alpha1.ApplicationDestination{{Server: "*", Namespace: "*"}}},
	}))
	ns := env.Namespace(t)
	apps := map[string]string{"remediable": v1alpha1.DefaultAppProjectName, "elsewhere": "other"}
	for name, project := range apps {
		// hand-written state: a Complete hook Job on an apiserver with no Job controller: the test is about the shipped
		// account's RBAC through argocd-server.
		job := testenv.CreateCompletedJob(t, env, testenv.HookJob{Name: name + "-migrate", Namespace: ns, App: name}, false)
		app := argo.NewApplication(name, ns)
		app.Spec.Project = project
		argo.CreateApplication(t, app)
		// hand-written state: the in-process argocd-server runs no application-controller; this test is about the RBAC
		// the manifests grant syncmedic on argocd-server, which only needs the resource tree to hold the hook.
		argo.SetResources(t, name, job)
	}
	// The token is issued by the issuer role's holder, not by admin, as the README says.
	client := argo.Applications(t, argo.TokenIssuedBy(t, argo.Token(t, "platform"), "syncmedic"))
	patch := func(app string) error {
		_, err := client.PatchResource(ctx, &applicationpkg.ApplicationResourcePatchRequest{
			Name: ptr.To(app), Namespace: ptr.To(ns), ResourceName: ptr.To(app + "-migrate"), Group: ptr.To("batch"),
			Version: ptr.To("v1"), Kind: ptr.To("Job"), PatchType: ptr.To("application/merge-patch+json"),
			Patch: ptr.To(`{"metadata":{"annotations":{"syncmedic.io/test":"patched"}}}`)})
		return err
	}
	terminate := func(app string) error {
		_, err := client.TerminateOperation(ctx, &applicationpkg.OperationTerminateRequest{Name: ptr.To(app)})
		return err
	}
	deleteApp := func(app string) error {
		_, err := client.Delete(ctx, &applicationpkg.ApplicationDeleteRequest{Name: ptr.To(app)})
		return err
	}
	denied := func(t *testing.T, err error) {
		require.Equal(t, codes.PermissionDenied, status.Code(err), "got %v", err)
	}
	allowed := func(t *testing.T, err error) {
		require.NotEqual(t, codes.PermissionDenied, status.Code(err), "got %v", err)
	}

	t.Run("it gets applications in every project", func(t *testing.T) {
		for name := range apps {
			_, err := client.Get(ctx, &applicationpkg.ApplicationQuery{Name: ptr.To(name)})
			require.NoError(t, err)
		}
	})
	t.Run("it patches a hook where remedies are allowed", func(t *testing.T) {
		require.NoError(t, patch("remediable"))
		require.Equal(t, "patched", testenv.GetJob(t, env, ns, "remediable-migrate").Annotations["syncmedic.io/test"])
	})
	t.Run("it may terminate operations where remedies are allowed", func(t *testing.T) {
		err := terminate("remediable")
		require.ErrorContains(t, err, "No operation is in progress", "RBAC lets it through; nothing is running to terminate")
		allowed(t, err)
	})
	t.Run("it cannot patch, terminate or sync elsewhere", func(t *testing.T) {
		denied(t, patch("elsewhere"))
		denied(t, terminate("elsewhere"))
		_, err := client.Sync(ctx, &applicationpkg.ApplicationSyncRequest{Name: ptr.To("elsewhere")})
		denied(t, err)
	})
	t.Run("it cannot delete applications anywhere", func(t *testing.T) {
		denied(t, deleteApp("remediable"))
		denied(t, deleteApp("elsewhere"))
	})
}
