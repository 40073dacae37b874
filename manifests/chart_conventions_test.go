package manifests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestTheChartFollowsHelmConventions renders the chart with the values platform teams expect of a chart: an existing
// or annotated ServiceAccount (bound by both roles), priorityClassName, topologySpreadConstraints, extra env,
// envFrom, volumes and mounts, and an Ingress carrying only what is called from outside the cluster.
func TestTheChartFollowsHelmConventions(t *testing.T) {
	t.Run("an existing ServiceAccount is bound and not created", func(t *testing.T) {
		objs := helmTemplate(t, "syncmedic", "syncmedic", "serviceAccount.create=false", "serviceAccount.name=platform-sa")
		require.NotContains(t, kinds(objs), "ServiceAccount")
		require.Equal(t, "platform-sa", deployment(t, objs).Spec.Template.Spec.ServiceAccountName)
		var rb rbacv1.RoleBinding
		convert(t, find(t, objs, "RoleBinding", "syncmedic"), &rb)
		require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "platform-sa", Namespace: "syncmedic"}}, rb.Subjects)
		var crb rbacv1.ClusterRoleBinding
		convert(t, find(t, objs, "ClusterRoleBinding", "syncmedic"), &crb)
		require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "platform-sa", Namespace: "syncmedic"}}, crb.Subjects)
	})
	t.Run("serviceAccount.create=false without a name is refused", func(t *testing.T) {
		_, err := runHelm(t, "syncmedic", "syncmedic", "serviceAccount.create=false")
		require.ErrorContains(t, err, "serviceAccount.create=false needs serviceAccount.name")
	})
	t.Run("the created ServiceAccount carries its annotations", func(t *testing.T) {
		objs := helmTemplate(t, "syncmedic", "syncmedic", "serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=syncmedic@p.iam.gserviceaccount.com")
		var sa corev1.ServiceAccount
		convert(t, find(t, objs, "ServiceAccount", "syncmedic"), &sa)
		require.Equal(t, map[string]string{"iam.gke.io/gcp-service-account": "syncmedic@p.iam.gserviceaccount.com"}, sa.Annotations)
	})
	t.Run("Pod extras are passed through", func(t *testing.T) {
		spec := deployment(t, helmTemplate(t, "syncmedic", "syncmedic", everything...)).Spec.Template.Spec
		require.Equal(t, "platform-critical", spec.PriorityClassName)
		require.Len(t, spec.TopologySpreadConstraints, 1)
		require.Equal(t, "topology.kubernetes.io/zone", spec.TopologySpreadConstraints[0].TopologyKey)
		c := spec.Containers[0]
		require.Equal(t, []string{"POD_NAME", "HTTPS_PROXY"}, envNames(c.Env), "POD_NAME (leader election) stays first")
		require.Equal(t, "proxy-settings", c.EnvFrom[0].ConfigMapRef.Name)
		require.Equal(t, corev1.VolumeMount{Name: "ca-bundle", MountPath: "/etc/ssl/extra"}, c.VolumeMounts[len(c.VolumeMounts)-1])
		require.Equal(t, "ca-bundle", spec.Volumes[len(spec.Volumes)-1].ConfigMap.Name)
	})
	t.Run("the Ingress routes Slack's Request URL and the incident page, never the Flux receiver", func(t *testing.T) {
		objs := helmTemplate(t, "syncmedic", "syncmedic", everything...)
		var ing networkingv1.Ingress
		convert(t, find(t, objs, "Ingress", "syncmedic"), &ing)
		require.Equal(t, "nginx", *ing.Spec.IngressClassName)
		require.Equal(t, "syncmedic.example.com", ing.Spec.Rules[0].Host)
		var paths []string
		for _, p := range ing.Spec.Rules[0].HTTP.Paths {
			paths = append(paths, string(*p.PathType)+" "+p.Path)
			require.Equal(t, "syncmedic", p.Backend.Service.Name)
			require.Equal(t, "http", p.Backend.Service.Port.Name)
		}
		require.Equal(t, []string{"Exact /slack/interactions", "Prefix /ui/", "Prefix /api/v1/"}, paths)
		require.Equal(t, "syncmedic-tls", ing.Spec.TLS[0].SecretName)

		objs = helmTemplate(t, "syncmedic", "syncmedic", "incidentAPI.enabled=true", "ingress.enabled=true", "ingress.host=syncmedic.example.com")
		convert(t, find(t, objs, "Ingress", "syncmedic"), &ing)
		require.Len(t, ing.Spec.Rules[0].HTTP.Paths, 2, "without Slack's Request URL only the page and its API")
		require.NotContains(t, kinds(helmTemplate(t, "syncmedic", "syncmedic")), "Ingress")
	})
	t.Run("an Ingress with nothing to route, or without a host, is refused", func(t *testing.T) {
		_, err := runHelm(t, "syncmedic", "syncmedic", "ingress.enabled=true", "ingress.host=syncmedic.example.com")
		require.ErrorContains(t, err, "ingress.enabled exposes Slack's Request URL (slack.interactivity=requestURL) and the incident page (incidentAPI.enabled=true)")
		_, err = runHelm(t, "syncmedic", "syncmedic", "ingress.enabled=true", "incidentAPI.enabled=true")
		require.ErrorContains(t, err, "ingress.enabled needs ingress.host")
	})
}

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

// TestTheChartInstallsAsASubchartWithGlobalValues renders and lints an umbrella chart that depends on syncmedic and
// passes global values, as umbrella charts pass them to every subchart: the schema accepts global, and the subchart's
// own values reach it under its name.
func TestTheChartInstallsAsASubchartWithGlobalValues(t *testing.T) {
	umbrella := filepath.Join(t.TempDir(), "platform")
	require.NoError(t, os.MkdirAll(filepath.Join(umbrella, "charts"), 0o755))
	require.NoError(t, os.CopyFS(filepath.Join(umbrella, "charts", "syncmedic"), os.DirFS(chartDir)))
	require.NoError(t, os.WriteFile(filepath.Join(umbrella, "Chart.yaml"), []byte(`apiVersion: v2
name: platform
description: An umbrella chart of a platform team
version: 1.0.0
dependencies:
  - name: syncmedic
    version: ">=0.0.0-0"
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(umbrella, "values.yaml"), []byte(`global:
  imageRegistry: registry.example.com
  labels: {team: platform}
syncmedic:
  replicas: 3
`), 0o644))
	lint, err := testenv.HelmCommand(t, "lint", "--strict", umbrella).CombinedOutput()
	require.NoError(t, err, "%s", lint)
	require.Contains(t, string(lint), "0 chart(s) failed")
	out, err := testenv.HelmCommand(t, "template", "platform", umbrella, "--namespace", "platform").Output()
	require.NoError(t, err)
	d := deployment(t, decodeObjects(t, out))
	require.Equal(t, int32(3), *d.Spec.Replicas)
	require.Equal(t, "platform-syncmedic", d.Name)
}
