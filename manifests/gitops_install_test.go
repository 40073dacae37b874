package manifests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// installExample is a file of examples/install.
func installExample(file string) string { return filepath.Join("..", "examples", "install", file) }

// commentedBlock returns the YAML a comment of file shows after the line containing marker: the following lines
// that start with "#   ", without that prefix.
func commentedBlock(t *testing.T, file, marker string) []byte {
	t.Helper()
	var out []string
	found := false
	for _, line := range strings.Split(readFile(t, file), "\n") {
		if !found {
			found = strings.Contains(line, marker)
			continue
		}
		rest, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			break
		}
		out = append(out, rest)
	}
	require.NotEmpty(t, out, "%s shows no YAML after %q", file, marker)
	return []byte(strings.Join(out, "\n") + "\n")
}

// chartMeta is the chart's Chart.yaml: the chart version (OCI tags) and appVersion (the release tag).
func chartMeta(t *testing.T) (version, appVersion string) {
	t.Helper()
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "Chart.yaml"))), &c))
	return c.Version, c.AppVersion
}

// renderWithValues runs helm template of the chart as release in namespace with values (a map) as a values file:
// the chart's values.schema.json checks them. It returns the Deployment's serve arguments.
func renderWithValues(t *testing.T, release, namespace string, values interface{}) []string {
	t.Helper()
	b, err := yaml.Marshal(values)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, b, 0o600))
	out, err := runHelm(t, release, namespace, "--values="+file)
	require.NoError(t, err, "helm template with the example's values:\n%s", b)
	var d appsv1.Deployment
	convert(t, find(t, decodeObjects(t, out), "Deployment", "syncmedic"), &d)
	require.Equal(t, namespace, d.Namespace)
	return d.Spec.Template.Spec.Containers[0].Args
}

// exampleArgs are the serve flags the values of both examples turn into: argocd-server in-cluster (the default
// tls.mode ca) and Slack.
var exampleArgs = []string{"--argocd-server=argocd-server.argocd.svc:443", "--slack-channel=#gitops-incidents"}

// dryRun creates each object in namespace ns of the test apiserver with a server-side dry run, unknown fields
// refused (fieldValidation Strict, as kubectl apply does).
func dryRun(t *testing.T, env *testenv.Env, ns string, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetNamespace(ns)
		require.NoError(t, env.Client.Create(context.Background(), o, client.DryRunAll, client.FieldValidation("Strict")), "%s %s", o.GetKind(), o.GetName())
	}
}

// argoCDApplicationExample is examples/install/argocd-application.yaml: the Application, its decoded source and
// destination namespace, and the commented OCI variant's source.
type argoCDApplicationExample struct {
	obj         *unstructured.Unstructured
	source, oci appSource
	namespace   string
}

func readArgoCDApplicationExample(t *testing.T) argoCDApplicationExample {
	t.Helper()
	file := installExample("argocd-application.yaml")
	objs := decodeObjects(t, []byte(readFile(t, file)))
	require.Len(t, objs, 1)
	require.Equal(t, "Application", objs[0].GetKind())
	require.Equal(t, "argocd", objs[0].GetNamespace())
	var app struct {
		Spec struct {
			Source      appSource `json:"source"`
			Destination struct {
				Server    string `json:"server"`
				Namespace string `json:"namespace"`
			} `json:"destination"`
		} `json:"spec"`
	}
	convert(t, objs[0], &app)
	require.Equal(t, "https://kubernetes.default.svc", app.Spec.Destination.Server)
	var oci struct {
		Source appSource `json:"source"`
	}
	require.NoError(t, yaml.UnmarshalStrict(commentedBlock(t, file, "replace spec.source with:"), &oci))
	return argoCDApplicationExample{obj: objs[0], source: app.Spec.Source, oci: oci.Source, namespace: app.Spec.Destination.Namespace}
}

// TestTheArgoCDApplicationExampleRendersTheChart checks examples/install/argocd-application.yaml: its source is this
// repository's chart at the release tag (or, in the comment, the OCI chart at the chart's version, with the same
// values), and the values it passes render with helm template against the chart's schema as the release and
// namespace it names.
func TestTheArgoCDApplicationExampleRendersTheChart(t *testing.T) {
	ex := readArgoCDApplicationExample(t)
	version, appVersion := chartMeta(t)
	src := ex.source
	require.Equal(t, "https://github.com/syncmedic/syncmedic.git", src.RepoURL)
	require.Equal(t, appVersion, src.TargetRevision, "the release tag is the chart's appVersion")
	require.Equal(t, filepath.Clean(chartDir), filepath.Clean(filepath.Join("..", src.Path)))
	require.FileExists(t, filepath.Join("..", src.Path, "Chart.yaml"))
	require.Equal(t, "syncmedic", ex.namespace)
	require.Equal(t, version, ex.oci.TargetRevision, "an OCI chart is tagged with the chart's version")
	require.Equal(t, "syncmedic", ex.oci.Chart)
	require.Equal(t, src.Helm, ex.oci.Helm, "the OCI variant passes the same values")
	require.Subset(t, renderWithValues(t, src.Helm.ReleaseName, ex.namespace, src.Helm.ValuesObject), exampleArgs)

	// The schema is what checks them: the same values with a key misspelled are refused.
	bad := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("argocd:\n  servr: argocd-server.argocd.svc:443\n"), 0o600))
	_, err := runHelm(t, src.Helm.ReleaseName, ex.namespace, "--values="+bad)
	require.ErrorContains(t, err, "servr")
}

// TestTheArgoCDApplicationExampleAppliesToTheApiserver has the apiserver accept the example's Application and its
// OCI variant with Argo CD's Application CRD (server-side dry run).
func TestTheArgoCDApplicationExampleAppliesToTheApiserver(t *testing.T) {
	ex := readArgoCDApplicationExample(t)
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	dryRun(t, env, ns, ex.obj)
	ociApp := ex.obj.DeepCopy()
	raw, err := yaml.Marshal(ex.oci)
	require.NoError(t, err)
	var ociSource map[string]interface{}
	require.NoError(t, yaml.Unmarshal(raw, &ociSource))
	require.NoError(t, unstructured.SetNestedField(ociApp.Object, ociSource, "spec", "source"))
	dryRun(t, env, ns, ociApp)
}

// appSource is the part of an Argo CD ApplicationSource the example sets.
type appSource struct {
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path,omitempty"`
	Chart          string `json:"chart,omitempty"`
	TargetRevision string `json:"targetRevision"`
	Helm           struct {
		ReleaseName  string                 `json:"releaseName"`
		ValuesObject map[string]interface{} `json:"valuesObject"`
	} `json:"helm"`
}

// fluxExample is examples/install/flux-helmrelease.yaml: its objects (the GitRepository, the HelmRelease) and the
// commented OCI variant (the OCIRepository, the HelmRelease with its chartRef).
type fluxExample struct {
	objs                []*unstructured.Unstructured
	oci, ociHelmRelease *unstructured.Unstructured
}

func readFluxExample(t *testing.T) fluxExample {
	t.Helper()
	file := installExample("flux-helmrelease.yaml")
	objs := decodeObjects(t, []byte(readFile(t, file)))
	require.Equal(t, []string{"GitRepository flux-system/syncmedic", "HelmRelease flux-system/syncmedic"}, identities(objs))
	oci := &unstructured.Unstructured{}
	require.NoError(t, yaml.UnmarshalStrict(commentedBlock(t, file, "replace the GitRepository with:"), &oci.Object))
	m := regexp.MustCompile(`spec\.chartRef: (\{[^}]*\})`).FindStringSubmatch(readFile(t, file))
	require.NotNil(t, m, "the comment names the HelmRelease's chartRef")
	var chartRef map[string]interface{}
	require.NoError(t, yaml.Unmarshal([]byte(m[1]), &chartRef))
	require.Equal(t, map[string]interface{}{"kind": oci.GetKind(), "name": oci.GetName()}, chartRef)
	release := objs[1].DeepCopy()
	unstructured.RemoveNestedField(release.Object, "spec", "chart")
	require.NoError(t, unstructured.SetNestedField(release.Object, chartRef, "spec", "chartRef"))
	return fluxExample{objs: objs, oci: oci, ociHelmRelease: release}
}

// TestTheFluxHelmReleaseExampleRendersTheChart checks examples/install/flux-helmrelease.yaml: the GitRepository is
// this repository at the release tag (the commented OCIRepository the chart's version), the HelmRelease installs
// its chart path as release syncmedic into namespace syncmedic, and its values render with helm template against
// the chart's schema.
func TestTheFluxHelmReleaseExampleRendersTheChart(t *testing.T) {
	ex := readFluxExample(t)
	version, appVersion := chartMeta(t)
	var repo struct {
		Spec struct {
			URL string `json:"url"`
			Ref struct {
				Tag string `json:"tag"`
			} `json:"ref"`
		} `json:"spec"`
	}
	convert(t, ex.objs[0], &repo)
	require.Equal(t, "https://github.com/syncmedic/syncmedic", repo.Spec.URL)
	require.Equal(t, appVersion, repo.Spec.Ref.Tag, "the release tag is the chart's appVersion")
	tag, _, _ := unstructured.NestedString(ex.oci.Object, "spec", "ref", "tag")
	require.Equal(t, version, tag, "an OCI chart is tagged with the chart's version")
	var hr struct {
		Spec struct {
			ReleaseName      string `json:"releaseName"`
			TargetNamespace  string `json:"targetNamespace"`
			StorageNamespace string `json:"storageNamespace"`
			Chart            struct {
				Spec struct {
					Chart     string `json:"chart"`
					SourceRef struct {
						Kind string `json:"kind"`
						Name string `json:"name"`
					} `json:"sourceRef"`
				} `json:"spec"`
			} `json:"chart"`
			Values map[string]interface{} `json:"values"`
		} `json:"spec"`
	}
	convert(t, ex.objs[1], &hr)
	require.Equal(t, "syncmedic", hr.Spec.ReleaseName, "without it Flux names the release <targetNamespace>-<name>")
	require.Equal(t, "syncmedic", hr.Spec.TargetNamespace)
	require.Equal(t, "syncmedic", hr.Spec.StorageNamespace)
	require.Equal(t, filepath.Clean(chartDir), filepath.Clean(filepath.Join("..", hr.Spec.Chart.Spec.Chart)))
	require.Equal(t, "GitRepository", hr.Spec.Chart.Spec.SourceRef.Kind)
	require.Equal(t, ex.objs[0].GetName(), hr.Spec.Chart.Spec.SourceRef.Name)
	require.Subset(t, renderWithValues(t, hr.Spec.ReleaseName, hr.Spec.TargetNamespace, hr.Spec.Values), exampleArgs)
}

// TestTheFluxHelmReleaseExampleAppliesToTheApiserver has the apiserver accept the example's objects and its OCI
// variant with Flux's CRDs (source-controller's and the HelmRelease's; server-side dry run).
func TestTheFluxHelmReleaseExampleAppliesToTheApiserver(t *testing.T) {
	ex := readFluxExample(t)
	env := testenv.Kube(t)
	require.NoError(t, fluxreal.InstallCRDs(env, "crds-source-controller"))
	ns := env.Namespace(t)
	dryRun(t, env, ns, ex.objs...)
	dryRun(t, env, ns, ex.oci, ex.ociHelmRelease)
}

// TestTheREADMELinksTheGitOpsInstallExamples: the README's install section points to both examples.
func TestTheREADMELinksTheGitOpsInstallExamples(t *testing.T) {
	section := readmeSection(t, "## Install")
	for _, f := range []string{"argocd-application.yaml", "flux-helmrelease.yaml"} {
		require.FileExists(t, installExample(f))
		require.Contains(t, section, "(examples/install/"+f+")")
	}
}
