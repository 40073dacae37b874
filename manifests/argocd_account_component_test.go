package manifests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/argoproj/argo-cd/v2/util/rbac"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// argoCDConfigMaps stands in for an Argo CD install without the CMP sidecar: the two ConfigMaps the account component
// patches, holding the user's own settings and policy, and what the extension component patches besides.
const argoCDConfigMaps = `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
data:
  url: https://argocd.example.com
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-rbac-cm}
data:
  policy.csv: |
    g, platform-team, role:admin
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-server
spec:
  selector: {matchLabels: {app.kubernetes.io/name: argocd-server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-server}}
    spec:
      containers:
        - name: argocd-server
          image: quay.io/argoproj/argocd:v3.6.1
`

// argoCDWithComponents writes a kustomization installing argoCDConfigMaps into namespace ns with the given components
// of manifests/components, as a user includes them, and returns its directory.
func argoCDWithComponents(t *testing.T, ns string, components ...string) string {
	t.Helper()
	dir := writeKustomization(t, map[string]string{"install.yaml": argoCDConfigMaps})
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n  - install.yaml\ncomponents:\n"
	for _, c := range components {
		abs, err := filepath.Abs(filepath.Join("components", c))
		require.NoError(t, err)
		rel, err := filepath.Rel(dir, abs) // kustomize refuses absolute paths to components
		require.NoError(t, err)
		k += "  - " + rel + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// configMapData returns the data of the ConfigMap name among objs.
func configMapData(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	var cm corev1.ConfigMap
	convert(t, find(t, objs, "ConfigMap", name), &cm)
	return cm.Data
}

// TestTheArgoCDAccountComponentWorksWithoutTheSidecar builds manifests/components/argocd-account alone over an Argo
// CD install's ConfigMaps, and together with the extension component: the account and its policy key are added, the
// user's settings and policy stay, and the extension's policy key does not replace the account's.
func TestTheArgoCDAccountComponentWorksWithoutTheSidecar(t *testing.T) {
	want := componentConfigMap(t, "argocd-rbac-cm.yaml")["policy.syncmedic.csv"]
	require.Contains(t, want, "g, syncmedic, role:syncmedic")
	for _, tc := range []struct {
		name       string
		components []string
	}{
		{"the account alone", []string{"argocd-account"}},
		{"the account and the extension", []string{"argocd-account", "argocd-extension"}},
		{"the extension and the account", []string{"argocd-extension", "argocd-account"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := build(t, argoCDWithComponents(t, "argocd", tc.components...))
			cm, rbacCM := configMapData(t, objs, "argocd-cm"), configMapData(t, objs, "argocd-rbac-cm")
			require.Equal(t, "apiKey", cm["accounts.syncmedic"])
			require.Equal(t, "https://argocd.example.com", cm["url"], "the user's settings stay")
			require.Equal(t, "g, platform-team, role:admin\n", rbacCM["policy.csv"], "the user's policy stays")
			require.Equal(t, want, rbacCM["policy.syncmedic.csv"])
			require.NoError(t, rbac.ValidatePolicy(rbac.PolicyCSV(rbacCM)))
			if len(tc.components) > 1 {
				require.Contains(t, rbacCM["policy.syncmedic-extension.csv"], "p, role:readonly, extensions, invoke, syncmedic, allow")
			}
		})
	}
	t.Run("beside the CMP component, the account component brings the same account", func(t *testing.T) {
		objs := buildArgoCDWithComponent(t, "argocd", true)
		var rbacCM corev1.ConfigMap
		objs["ConfigMap/argocd-rbac-cm"].into(t, &rbacCM)
		require.Equal(t, want, rbacCM.Data["policy.syncmedic.csv"])
	})
}

// TestTheArgoCDAccountComponentAppliesToTheApiserver server-side dry-runs the account component's build (with the
// extension component too) in a namespace of the test apiserver.
func TestTheArgoCDAccountComponentAppliesToTheApiserver(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	objs := build(t, argoCDWithComponents(t, ns, "argocd-account", "argocd-extension"))
	require.NotEmpty(t, objs)
	for _, o := range objs {
		require.NoError(t, env.Client.Create(context.Background(), o.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")), "%s/%s", o.GetKind(), o.GetName())
	}
}

// userDocs is the README and the install and Slack pages it sends users to (docs/), one after the other: the
// commands and blocks the tests check are in one of them.
func userDocs(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"README.md", "docs/install-kustomize.md", "docs/install-helm.md", "docs/slack.md"} {
		b.WriteString(readFile(t, filepath.Join("..", f)) + "\n")
	}
	return b.String()
}

// fence matches a fenced block of the README: its language and its content.
var fence = regexp.MustCompile("(?ms)^```(\\w*)\\n(.*?)^```$")

// readmeBlock returns the fenced block of language lang that contains sub, in the README or its pages (userDocs).
func readmeBlock(t *testing.T, lang, sub string) string {
	t.Helper()
	for _, m := range fence.FindAllStringSubmatch(userDocs(t), -1) {
		if m[1] == lang && strings.Contains(m[2], sub) {
			return m[2]
		}
	}
	t.Fatalf("README.md and its pages have no %s block containing %q", lang, sub)
	return ""
}

// readmeSection returns the section under heading of the README or its pages (userDocs), up to the next heading of
// any level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(userDocs(t), "\n"+heading+"\n")
	require.True(t, ok, "README.md and its pages have no heading %q", heading)
	if i := regexp.MustCompile(`(?m)^#{1,4} `).FindStringIndex(after); i != nil {
		after = after[:i[0]]
	}
	return after
}

// TestTheREADMEAccountStepsNeedNoInitialAdminSecret checks the README's account section: its commands log in without
// argocd-initial-admin-secret (production installs delete it), the argo-cd chart values it gives are the
// component's keys, and it names the component.
func TestTheREADMEAccountStepsNeedNoInitialAdminSecret(t *testing.T) {
	section := readmeSection(t, "### The syncmedic Argo CD account")
	require.NotContains(t, section, "argocd-initial-admin-secret")
	require.NotContains(t, strings.ToLower(readmeBlock(t, "sh", "argocd account generate-token --account syncmedic")), "initial-admin")
	require.Contains(t, section, "manifests/components/argocd-account")

	var values struct {
		Configs struct {
			CM   map[string]string `json:"cm"`
			RBAC map[string]string `json:"rbac"`
		} `json:"configs"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(readmeBlock(t, "yaml", "# values of the argo-cd chart (argo/argo-cd)\nconfigs:")), &values))
	require.Equal(t, componentConfigMap(t, "argocd-cm.yaml"), values.Configs.CM)
	// The component's policy less its commented-out line (YAML keeps it in the block; the README's values drop it).
	var lines []string
	for _, l := range strings.Split(componentConfigMap(t, "argocd-rbac-cm.yaml")["policy.syncmedic.csv"], "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	require.Equal(t, map[string]string{"policy.syncmedic.csv": strings.Join(lines, "\n")}, values.Configs.RBAC)
}
