package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// baseWith writes a kustomization of manifests/base with the component manifests/components/<component>, the way a
// user includes it, and returns its directory.
func baseWith(t *testing.T, component string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		abs, err := filepath.Abs(p)
		require.NoError(t, err)
		r, err := filepath.Rel(dir, abs)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: ["+rel("base")+"]\ncomponents: ["+
			rel(filepath.Join("components", component))+"]\n"), 0o644))
	return dir
}

// fluxGroups are the API groups only the Flux part reads or writes.
var fluxGroups = []string{"helm.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "apiextensions.k8s.io"}

// TestInstallsWithoutFlux renders the base with manifests/components/without-flux and the chart with
// flux.enabled=false: serve runs with --flux=false and no --flux-hmac-token-file (so its Secret needs no
// flux-hmac-token), nothing on Flux's objects is granted, notification-controller is not admitted, and both
// render the same rules; everything else stays as in the install with Flux.
func TestInstallsWithoutFlux(t *testing.T) {
	kustomized := build(t, baseWith(t, "without-flux"))
	charted := helmTemplate(t, "syncmedic", "syncmedic", "flux.enabled=false")
	full := build(t, "base")
	check := func(t *testing.T, objs, withFlux []*unstructured.Unstructured) {
		args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
		require.Contains(t, args, "--flux=false")
		for _, a := range args {
			require.NotContains(t, a, "--flux-hmac-token-file")
		}
		var cr, crWith rbacv1.ClusterRole
		convert(t, find(t, objs, "ClusterRole", "syncmedic"), &cr)
		convert(t, find(t, withFlux, "ClusterRole", "syncmedic"), &crWith)
		var kept []rbacv1.PolicyRule
		for _, r := range crWith.Rules {
			flux := slices.ContainsFunc(r.APIGroups, func(g string) bool { return slices.Contains(fluxGroups, g) }) ||
				slices.Equal(r.Resources, []string{"deployments", "statefulsets", "daemonsets"}) ||
				(slices.Equal(r.Resources, []string{"events"}) && slices.Equal(r.Verbs, []string{"list"}))
			if !flux {
				kept = append(kept, r)
			}
		}
		require.Equal(t, kept, cr.Rules, "exactly the Flux rules are gone")
		var np networkingv1.NetworkPolicy
		convert(t, find(t, objs, "NetworkPolicy", "syncmedic-receiver"), &np)
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.From {
				if p.PodSelector != nil {
					require.NotEqual(t, "notification-controller", p.PodSelector.MatchLabels["app"])
				}
			}
		}
	}
	t.Run("kustomize: base with components/without-flux", func(t *testing.T) { check(t, kustomized, full) })
	t.Run("chart: flux.enabled=false", func(t *testing.T) { check(t, charted, helmTemplate(t, "syncmedic", "syncmedic")) })
	t.Run("both grant the same", func(t *testing.T) {
		var k, c rbacv1.ClusterRole
		convert(t, find(t, kustomized, "ClusterRole", "syncmedic"), &k)
		convert(t, find(t, charted, "ClusterRole", "syncmedic"), &c)
		require.Equal(t, k.Rules, c.Rules)
	})
	t.Run("the chart's Secret needs no flux-hmac-token", func(t *testing.T) {
		objs := helmTemplate(t, "syncmedic", "syncmedic", "flux.enabled=false", "secrets.create=true", "secrets.argocdToken=argo")
		data, _, _ := unstructured.NestedStringMap(find(t, objs, "Secret", "syncmedic-secrets").Object, "stringData")
		require.Equal(t, map[string]string{"argocd-token": "argo"}, data)
	})
}
