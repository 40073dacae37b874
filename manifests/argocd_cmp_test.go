package manifests

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-cd/v2/cmpserver/plugin"
	"github.com/argoproj/argo-cd/v2/common"
	"github.com/argoproj/argo-cd/v2/util/rbac"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// argoCDInstall stands in for the user's Argo CD installation: the three objects the component patches, as the
// upstream install manifests define them (the repo-server with its var-files and plugins volumes).
const argoCDInstall = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: argocd-repo-server
  template:
    metadata:
      labels:
        app.kubernetes.io/name: argocd-repo-server
    spec:
      containers:
        - name: argocd-repo-server
          image: quay.io/argoproj/argocd:v2.14.21
          volumeMounts:
            - name: var-files
              mountPath: /var/run/argocd
            - name: plugins
              mountPath: /home/argocd/cmp-server/plugins
      volumes:
        - name: var-files
          emptyDir: {}
        - name: plugins
          emptyDir: {}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
  url: https://argocd.example.com
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-rbac-cm
data:
  policy.csv: |
    g, platform-team, role:admin
`

// argoCDWithComponent writes a kustomization installing argoCDInstall into namespace ns with the argocd-cmp
// component and, with account, the argocd-account component beside it (what serve needs), the way a user includes
// them, and returns its directory.
func argoCDWithComponent(t *testing.T, ns string, account bool) string {
	t.Helper()
	dir := writeKustomization(t, map[string]string{"install.yaml": argoCDInstall})
	components := []string{"argocd-cmp"}
	if account {
		components = append(components, filepath.Join("components", "argocd-account"))
	}
	var list string
	for _, c := range components {
		abs, err := filepath.Abs(c)
		require.NoError(t, err)
		rel, err := filepath.Rel(dir, abs) // kustomize refuses absolute paths to components
		require.NoError(t, err)
		list += "  - " + rel + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: "+ns+
			"\nresources:\n  - install.yaml\ncomponents:\n"+list), 0o644))
	return dir
}

// buildArgoCDWithComponent builds argoCDWithComponent, by kind/name.
func buildArgoCDWithComponent(t *testing.T, ns string, account bool) map[string]*runtimeObject {
	t.Helper()
	out := map[string]*runtimeObject{}
	for _, o := range build(t, argoCDWithComponent(t, ns, account)) {
		out[o.GetKind()+"/"+o.GetName()] = &runtimeObject{o.Object}
	}
	return out
}

type runtimeObject struct{ obj map[string]interface{} }

func (r *runtimeObject) into(t *testing.T, v interface{}) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.obj, v))
}

func TestArgoCDComponent(t *testing.T) {
	objs := buildArgoCDWithComponent(t, "argocd", true)

	t.Run("the repo-server gets the CMP sidecar with Argo CD's cmp-server and the plugin config", func(t *testing.T) {
		var d appsv1.Deployment
		objs["Deployment/argocd-repo-server"].into(t, &d)
		require.Len(t, d.Spec.Template.Spec.Containers, 2, "the repo-server container stays")
		var c corev1.Container
		for _, x := range d.Spec.Template.Spec.Containers {
			if x.Name == "syncmedic-cmp" {
				c = x
			}
		}
		require.Equal(t, "ghcr.io/syncmedic/syncmedic:v0.1.0", c.Image)
		require.Equal(t, []string{"/var/run/argocd/argocd-cmp-server"}, c.Command)
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		require.Equal(t, map[string]string{
			"/var/run/argocd":                            "var-files",
			"/home/argocd/cmp-server/plugins":            "plugins",
			"/home/argocd/cmp-server/config/plugin.yaml": "syncmedic-cmp-plugin",
			"/tmp": "syncmedic-cmp-tmp",
		}, mounts)
		require.True(t, *c.SecurityContext.RunAsNonRoot)
		require.Equal(t, int64(999), *c.SecurityContext.RunAsUser)
		require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	})

	t.Run("plugin.yaml is a ConfigManagementPlugin Argo CD accepts", func(t *testing.T) {
		var cm corev1.ConfigMap
		objs["ConfigMap/syncmedic-cmp-plugin"].into(t, &cm)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, common.PluginConfigFileName), []byte(cm.Data["plugin.yaml"]), 0o600))
		cfg, err := plugin.ReadPluginConfig(dir)
		require.NoError(t, err)
		require.Equal(t, "syncmedic", cfg.Metadata.Name)
		require.Equal(t, []string{"/usr/local/bin/syncmedic", "cmp", "generate"}, cfg.Spec.Generate.Command)
		var names []string
		for _, p := range cfg.Spec.Parameters.Static {
			names = append(names, p.Name)
		}
		require.Equal(t, []string{"strict", "fix", "annotate", "values", "values-files", "set", "release-name", "recurse", "kustomize-allow-remote"}, names)
	})

	t.Run("the plugin alone adds no Argo CD account and no policy: rendering needs no write rights", func(t *testing.T) {
		alone := buildArgoCDWithComponent(t, "argocd", false)
		var cm, rbacCM corev1.ConfigMap
		alone["ConfigMap/argocd-cm"].into(t, &cm)
		alone["ConfigMap/argocd-rbac-cm"].into(t, &rbacCM)
		require.NotContains(t, cm.Data, "accounts.syncmedic")
		require.Equal(t, map[string]string{"policy.csv": "g, platform-team, role:admin\n"}, rbacCM.Data)
		require.Contains(t, alone, "Deployment/argocd-repo-server")
		require.Contains(t, alone, "ConfigMap/syncmedic-cmp-plugin")
	})

	t.Run("the account and policy are added without replacing the user's", func(t *testing.T) {
		var cm, rbacCM corev1.ConfigMap
		objs["ConfigMap/argocd-cm"].into(t, &cm)
		objs["ConfigMap/argocd-rbac-cm"].into(t, &rbacCM)
		require.Equal(t, "apiKey", cm.Data["accounts.syncmedic"])
		require.Equal(t, "https://argocd.example.com", cm.Data["url"])
		require.Contains(t, rbacCM.Data["policy.csv"], "g, platform-team, role:admin")
		require.NoError(t, rbac.ValidatePolicy(rbac.PolicyCSV(rbacCM.Data)))
	})
}

func TestArgoCDComponentAppliesAndItsPolicyIsEnforcedByArgoCD(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	cons := argoCDWithComponent(t, ns, true)
	objs := build(t, cons)
	apply(t, env.Client, objs)

	t.Run("the sidecar alone is admitted by the restricted Pod Security Standard", func(t *testing.T) {
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", "argocd-repo-server").Object, &d))
		restricted := env.Namespace(t)
		nsObj, err := env.Clientset.CoreV1().Namespaces().Get(context.Background(), restricted, metav1.GetOptions{})
		require.NoError(t, err)
		nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		_, err = env.Clientset.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{})
		require.NoError(t, err)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cmp-admission-check", Namespace: restricted}, Spec: d.Spec.Template.Spec}
		pod.Spec.Containers = nil
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "syncmedic-cmp" {
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			}
		}
		require.Len(t, pod.Spec.Containers, 1)
		require.NoError(t, env.Client.Create(context.Background(), pod, client.DryRunAll))
	})

	// Argo CD's own enforcer, with the policy read back from the applied argocd-rbac-cm.
	enf := rbac.NewEnforcer(env.Clientset, ns, common.ArgoCDRBACConfigMapName, nil)
	rbacCM, err := env.Clientset.CoreV1().ConfigMaps(ns).Get(context.Background(), common.ArgoCDRBACConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, rbacCM.Data["policy.csv"], "g, platform-team, role:admin", "the user's policy stays")
	require.NoError(t, enf.SetUserPolicy(rbac.PolicyCSV(rbacCM.Data)))
	tests := []struct {
		name                  string
		resource, action, obj string
		allowed               bool
	}{
		{"get any application it watches", "applications", "get", "shop/web", true},
		{"sync where remedies are allowed", "applications", "sync", "remediable/web", true},
		{"update where remedies are allowed", "applications", "update", "remediable/web", true},
		{"patch a hook's resource there (Argo CD 3 fine-grained form)", "applications", "update/batch/Job/web/migrate", "remediable/web", true},
		{"no sync elsewhere", "applications", "sync", "shop/web", false},
		{"no resource update elsewhere", "applications", "update/batch/Job/web/migrate", "shop/web", false},
		{"no delete anywhere", "applications", "delete", "remediable/web", false},
		{"no access to clusters", "clusters", "get", "https://kubernetes.default.svc", false},
		{"no access to repositories' credentials", "repositories", "get", "*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.allowed, enf.Enforce("syncmedic", tt.resource, tt.action, tt.obj))
		})
	}
}
