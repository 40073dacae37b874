package install

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// TestFluxRunsAsPodsFromItsUpstreamManifests installs source-, helm- and notification-controller as Pods from their
// modules' config/ manifests (Node.InstallFlux), then has them do a release end to end inside the cluster: a
// HelmRepository served by a busybox httpd Pod behind a Service, fetched by source-controller by the Service's DNS
// name; the chart's artifact, which helm-controller downloads from source-controller's Service by name; the release
// installed, its ConfigMap in the namespace.
func TestFluxRunsAsPodsFromItsUpstreamManifests(t *testing.T) {
	n := testenv.RealNode(t)
	n.InstallFlux(t)
	ns := n.Namespace(t)
	ctx := context.Background()
	core := n.Clientset.CoreV1()

	url := fluxreal.ServeChartsOnNode(t, n, ns, fluxreal.ConfigMapChart("hello", "0.1.0"))
	chartRelease(t, n, ns, url, "hello", "hello", "0.1.0")
	cm, err := core.ConfigMaps(ns).Get(ctx, "hello-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"chartVersion": `0.1.0`}, cm.Data)

	// The chart's artifact is served by source-controller at the address its upstream Deployment advertises (its
	// Service's DNS name), where helm-controller fetched it.
	helmChart := &unstructured.Unstructured{}
	helmChart.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	helmChart.SetKind("HelmChart")
	require.NoError(t, n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-hello"}, helmChart))
	artifact, _, _ := unstructured.NestedString(helmChart.Object, "status", "artifact", "url")
	require.Regexp(t, `^http://source-controller\.flux-system\.svc\.cluster\.local\./helmchart/`+ns+`/`+ns+`-hello/hello-0\.1\.0\.tgz$`, artifact)
	for _, c := range testenv.FluxPodControllers {
		pods, err := core.Pods(testenv.FluxNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + c.Name})
		require.NoError(t, err)
		require.Len(t, pods.Items, 1, c.Name)
		require.Equal(t, strings.TrimPrefix(c.Image(), "docker.io/"), pods.Items[0].Spec.Containers[0].Image, "the upstream Deployment's image")
		require.Equal(t, c.Image(), pods.Items[0].Status.ContainerStatuses[0].Image, "found in the node's containerd, never pulled")
		require.True(t, pods.Items[0].Status.ContainerStatuses[0].Ready, c.Name)
	}
}
