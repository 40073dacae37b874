package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// TestLiveScanReadsHelmStorage: `scan --kubeconfig` lists Helm's release Secrets (owner=helm) as
// flux/helmrelease-ready-unknown's evidence when the credentials allow it, and when they do not it still scans,
// says in the report that the list was skipped, and the finding says the storage was not read. Credentials made
// before the Kustomization rules (no Kustomizations, Flux sources or Events) still scan the rest. The apiserver is
// the test's own, with Flux's source and Kustomization CRDs, so every listed kind is served whatever ran before.
func TestLiveScanReadsHelmStorage(t *testing.T) {
	env := testenv.KubePrivate(t)
	require.NoError(t, fluxreal.InstallCRDs(env, "crds", fluxreal.SourceCRDDir, fluxreal.KustomizeCRDDir))
	ctx := context.Background()
	ns := env.Namespace(t)
	hrs := env.Dynamic.Resource(testenv.HelmReleaseGVR("v2")).Namespace(ns)
	created, err := hrs.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": "search", "namespace": ns},
		"spec": map[string]any{"interval": "10m", "timeout": "5m", "chart": map[string]any{"spec": map[string]any{
			"chart": "opensearch", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "opensearch"}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	at := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	msg := "Running 'install' action with timeout of 5m0s"
	created.Object["status"] = map[string]any{"observedGeneration": created.GetGeneration(), "conditions": []any{
		map[string]any{"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": msg, "lastTransitionTime": at},
		map[string]any{"type": "Reconciling", "status": "True", "reason": "Progressing", "message": msg, "lastTransitionTime": at},
	}}
	// hand-written state: the status helm-controller v1.4.3 leaves when it stops mid-install (no helm-controller runs
	// in these cmd tests; the real one reaches it in internal/conformance/flux
	// TestHelmChartJobsOnTheRealNode/ReleaseInProgressPastItsTimeoutIsReportedWithHelmStorage).
	_, err = hrs.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Helm's record of the release, as examples/stuck-cluster/helm-storage.yaml holds it (revision 1 deployed).
	raw, err := os.ReadFile("../../examples/stuck-cluster/helm-storage.yaml")
	require.NoError(t, err)
	var list struct{ Items []corev1.Secret }
	require.NoError(t, yaml.Unmarshal(raw, &list))
	secret := list.Items[0]
	secret.Namespace, secret.CreationTimestamp = ns, metav1.Time{}
	require.NoError(t, env.Client.Create(ctx, &secret))

	// scan returns the finding about the release and the report's problems; ok is false when there is none.
	scan := func(t *testing.T, kubeconfig string) (f syncmedic.Finding, problems []string, ok bool) {
		_, out, _ := runCLI(t, "scan", "--kubeconfig", kubeconfig, "-o", "json", "--rule", string(syncmedic.RuleReadyUnknownStuck))
		var r syncmedic.Report
		if json.Unmarshal([]byte(out), &r) != nil {
			return f, nil, false
		}
		for _, f := range r.Findings {
			if f.Object.Namespace == ns && f.Object.Name == "search" {
				return f, r.Problems, true
			}
		}
		return f, r.Problems, false
	}
	storage := func(f syncmedic.Finding) string {
		for _, e := range f.Evidence {
			if e.Field == "Helm storage" {
				return e.Value
			}
		}
		return ""
	}
	t.Run("with credentials that read Secrets the finding gives Helm's record", func(t *testing.T) {
		f, _, ok := scan(t, env.Kubeconfig)
		require.True(t, ok, "a finding about the release")
		require.Contains(t, f.Summary, "Helm's storage says revision 1 is deployed")
		require.Equal(t, ns+"/sh.helm.release.v1.search.v1: deployed (Install complete), chart opensearch@2.21.0, last deployed 2025-06-10T12:40:02Z", storage(f))
	})
	// readingAllBut returns a kubeconfig of a user who may read every kind the live scan lists but the resources
	// withheld, and the scan's finding and problems once RBAC has reached the authorizer.
	readingAllBut := func(t *testing.T, user string, withheld ...string) (syncmedic.Finding, []string) {
		resources := map[string][]string{
			"": {"persistentvolumeclaims", "services", "namespaces", "events", "secrets"}, "batch": {"jobs"}, "apps": {"deployments"},
			"discovery.k8s.io": {"endpointslices"}, "admissionregistration.k8s.io": {"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
			"argoproj.io": {"workflows"}, "helm.toolkit.fluxcd.io": {"helmreleases"}, "apiextensions.k8s.io": {"customresourcedefinitions"},
			"kustomize.toolkit.fluxcd.io": {"kustomizations"}, "source.toolkit.fluxcd.io": {"gitrepositories", "ocirepositories", "buckets"},
		}
		var rules []rbacv1.PolicyRule
		for group, rs := range resources {
			rs = slices.DeleteFunc(slices.Clone(rs), func(r string) bool { return slices.Contains(withheld, r) })
			if len(rs) > 0 {
				rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: rs, Verbs: []string{"get", "list", "watch"}})
			}
		}
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}))
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
		kubeconfig := env.UserKubeconfig(t, user)
		var f syncmedic.Finding
		var problems []string
		require.Eventually(t, func() bool { // RBAC takes a moment to reach the authorizer
			var ok bool
			f, problems, ok = scan(t, kubeconfig)
			return ok && len(problems) > 0
		}, 10*time.Second, 200*time.Millisecond)
		return f, problems
	}
	t.Run("without them the scan says the list was skipped and the finding that the storage was not read", func(t *testing.T) {
		f, problems := readingAllBut(t, "no-secrets-"+ns, "secrets")
		require.Len(t, problems, 1, "%v", problems)
		require.Contains(t, problems[0], "secrets (owner=helm): not readable with these credentials, skipped")
		require.Contains(t, storage(f), "not read")
		require.NotContains(t, f.Summary, "Helm's storage says")
	})
	t.Run("credentials without the Kustomization kinds skip them, name each, and still judge the HelmRelease", func(t *testing.T) {
		withheld := []string{"kustomizations", "gitrepositories", "ocirepositories", "buckets", "events"}
		f, problems := readingAllBut(t, "no-kustomizations-"+ns, withheld...)
		require.Len(t, problems, len(withheld), "%v", problems)
		for i, r := range withheld {
			require.True(t, strings.HasPrefix(problems[i], r), "problem %d names %s: %v", i, r, problems)
			require.Contains(t, problems[i], "not readable with these credentials, skipped")
		}
		require.Contains(t, problems[4], "events (involvedObject.kind=Kustomization)")
		require.Contains(t, f.Summary, "Helm's storage says revision 1 is deployed")
	})
}
