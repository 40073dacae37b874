package testenv

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmv2beta1 "github.com/fluxcd/helm-controller/api/v2beta1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

func TestKube(t *testing.T) {
	env := Kube(t)
	ctx := context.Background()

	t.Run("a fresh namespace exists for each test", func(t *testing.T) {
		ns := env.Namespace(t)
		got, err := env.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.NamespaceActive, got.Status.Phase)
		require.NotEqual(t, ns, env.Namespace(t))
	})

	t.Run("a HelmRelease written through v2beta1 reads back as v2", func(t *testing.T) {
		ns := env.Namespace(t)
		old := &helmv2beta1.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: ns},
			Spec: helmv2beta1.HelmReleaseSpec{
				Interval: metav1.Duration{Duration: 5 * time.Minute},
				Chart: &helmv2beta1.HelmChartTemplate{Spec: helmv2beta1.HelmChartTemplateSpec{
					Chart: "podinfo", SourceRef: helmv2beta1.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "charts"}}},
			},
		}
		require.NoError(t, env.Client.Create(ctx, old))
		got := &helmv2.HelmRelease{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "podinfo"}, got))
		require.Equal(t, "podinfo", got.Spec.Chart.Spec.Chart)
		require.Equal(t, "charts", got.Spec.Chart.Spec.SourceRef.Name)
	})

	t.Run("an Argo CD Application round-trips through the apiserver", func(t *testing.T) {
		ns := env.Namespace(t)
		app := &v1alpha1.Application{
			ObjectMeta: metav1.ObjectMeta{Name: "guestbook", Namespace: ns},
			Spec: v1alpha1.ApplicationSpec{Project: "default",
				Source:      &v1alpha1.ApplicationSource{RepoURL: "https://example.invalid/repo.git", Path: "guestbook"},
				Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: ns}},
		}
		require.NoError(t, env.Client.Create(ctx, app))
		got := &v1alpha1.Application{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "guestbook"}, got))
		require.Equal(t, "guestbook", got.Spec.Source.Path)
	})

	t.Run("an Argo Workflow round-trips through the dynamic client", func(t *testing.T) {
		ns := env.Namespace(t)
		wf := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
			"metadata": map[string]interface{}{"name": "hello", "namespace": ns},
			"spec": map[string]interface{}{"entrypoint": "main", "templates": []interface{}{
				map[string]interface{}{"name": "main", "container": map[string]interface{}{"image": "alpine"}}}},
		}}
		_, err := env.Dynamic.Resource(WorkflowGVR).Namespace(ns).Create(ctx, wf, metav1.CreateOptions{})
		require.NoError(t, err)
		got, err := env.Dynamic.Resource(WorkflowGVR).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
		require.NoError(t, err)
		entry, _, _ := unstructured.NestedString(got.Object, "spec", "entrypoint")
		require.Equal(t, "main", entry)
	})
}

func TestRedis(t *testing.T) {
	addr := Redis(t)
	require.NoError(t, pingRedis(addr))
}
