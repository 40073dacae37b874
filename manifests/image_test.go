package manifests

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestEveryInstallUsesTheSameImage: the kustomize base, the Argo CD CMP sidecar, the Helm chart's default and `make
// image`'s default all name one image, so building and pushing it once serves every install path.
func TestEveryInstallUsesTheSameImage(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "Chart.yaml"))), &chart))
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &values))
	want := values.Image.Repository + ":" + chart.AppVersion

	image := func(t *testing.T, objs []*unstructured.Unstructured, kind, name, container string) string {
		var d appsv1.Deployment
		convert(t, find(t, objs, kind, name), &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == container {
				return c.Image
			}
		}
		t.Fatalf("no container %s in %s %s", container, kind, name)
		return ""
	}
	cases := []struct {
		name string
		got  func(t *testing.T) string
	}{
		{"the kustomize base", func(t *testing.T) string {
			return image(t, build(t, "base"), "Deployment", "syncmedic", "syncmedic")
		}},
		{"the Argo CD CMP sidecar", func(t *testing.T) string {
			var d unstructured.Unstructured
			d.Object = buildArgoCDWithComponent(t, "argocd", true)["Deployment/argocd-repo-server"].obj
			return image(t, []*unstructured.Unstructured{&d}, "Deployment", "argocd-repo-server", "syncmedic-cmp")
		}},
		{"the Helm chart rendered with its defaults", func(t *testing.T) string {
			return image(t, helmTemplate(t, "syncmedic", "syncmedic"), "Deployment", "syncmedic", "syncmedic")
		}},
		{"make image's default IMAGE", func(t *testing.T) string {
			m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindStringSubmatch(readFile(t, filepath.Join("..", "Makefile")))
			require.NotNil(t, m, "no `IMAGE ?=` in the Makefile")
			return m[1]
		}},
	}
	for _, c := range cases {
		t.Run(c.name+" uses "+want, func(t *testing.T) {
			require.Equal(t, want, c.got(t))
		})
	}
}
