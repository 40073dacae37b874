package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestRealNodeRunsFluxAsPodsFromItsUpstreamManifests installs source-, helm- and notification-controller as Pods
// from their modules' config/ manifests (Node.InstallFlux), then has them do a release end to end inside the
// cluster: a HelmRepository served by a busybox httpd Pod behind a Service, fetched by source-controller by the
// Service's DNS name; the chart's artifact, which helm-controller downloads from source-controller's Service by
// name; the release installed, its ConfigMap in the namespace.
func TestRealNodeRunsFluxAsPodsFromItsUpstreamManifests(t *testing.T) {
	n := RealNode(t)
	n.InstallFlux(t)
	ns := n.Namespace(t)
	ctx := context.Background()
	core := n.Clientset.CoreV1()

	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "hello", Version: "0.1.0", Type: "application"},
		Templates: []*chart.File{{Name: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  chartVersion: {{ .Chart.Version | quote }}
`)}}}
	archive, err := chartutil.Save(ch, t.TempDir())
	require.NoError(t, err)
	digest, err := provenance.DigestFile(archive)
	require.NoError(t, err)
	index := repo.NewIndexFile()
	require.NoError(t, index.MustAdd(ch.Metadata, filepath.Base(archive), "", digest)) // a URL relative to the index
	indexYAML, err := yaml.Marshal(index)
	require.NoError(t, err)
	tgz, err := os.ReadFile(archive)
	require.NoError(t, err)
	_, err = core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "charts"},
		Data: map[string]string{"index.yaml": string(indexYAML)}, BinaryData: map[string][]byte{filepath.Base(archive): tgz}}, metav1.CreateOptions{})
	require.NoError(t, err)
	server := busyboxPod(ns, "charts", "httpd", "-f", "-p", "8080", "-h", "/www")
	server.Labels = map[string]string{"app": "charts"}
	server.Spec.Volumes = []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "charts"}}}}}
	server.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	_, err = core.Pods(ns).Create(ctx, server, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "charts"},
		Spec: corev1.ServiceSpec{Selector: server.Labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)

	repoURL := "http://charts." + ns + ".svc." + ClusterDomain
	for _, o := range []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
			"metadata": map[string]any{"namespace": ns, "name": "charts"},
			"spec":     map[string]any{"url": repoURL, "interval": "1m"}}},
		{Object: map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
			"metadata": map[string]any{"namespace": ns, "name": "hello"},
			"spec": map[string]any{"interval": "1m", "chart": map[string]any{"spec": map[string]any{
				"chart": "hello", "version": "0.1.0", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}}}},
	} {
		require.NoError(t, n.Client.Create(ctx, o), "%s", o.GetKind())
	}

	release := &unstructured.Unstructured{}
	release.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
	release.SetKind("HelmRelease")
	pollNode(t, n, "the HelmRelease is Ready and its chart's ConfigMap exists", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, release); err != nil {
			return false, nil
		}
		if !readyTrue(release) {
			return false, nil
		}
		_, err := core.ConfigMaps(ns).Get(ctx, "hello-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	cm, err := core.ConfigMaps(ns).Get(ctx, "hello-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"chartVersion": "0.1.0"}, cm.Data)

	// The chart's artifact is served by source-controller at the address its upstream Deployment advertises (its
	// Service's DNS name), where helm-controller fetched it.
	helmChart := &unstructured.Unstructured{}
	helmChart.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	helmChart.SetKind("HelmChart")
	require.NoError(t, n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-hello"}, helmChart))
	url, _, _ := unstructured.NestedString(helmChart.Object, "status", "artifact", "url")
	require.Regexp(t, `^http://source-controller\.source-system\.svc\.cluster\.local\./helmchart/`+ns+`/`+ns+`-hello/hello-0\.1\.0\.tgz$`, url)
	for _, c := range FluxPodControllers {
		pods, err := core.Pods(c.Namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, c.Name)
		require.Equal(t, strings.TrimPrefix(c.Image(), "docker.io/"), pods.Items[0].Spec.Containers[0].Image, "the upstream Deployment's image")
		require.Equal(t, c.Image(), pods.Items[0].Status.ContainerStatuses[0].Image, "found in the node's containerd, never pulled")
		require.True(t, pods.Items[0].Status.ContainerStatuses[0].Ready, c.Name)
	}
}

// readyTrue reports whether a Flux object's Ready condition is True for its current generation.
func readyTrue(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			return g == o.GetGeneration()
		}
	}
	return false
}
