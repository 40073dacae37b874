package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// fluxCRDs is the directory of the notification-controller CRDs, copied from its module by `make tools`.
func fluxCRDs(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SYNCMEDIC_BIN")
	if bin == "" {
		bin = filepath.Join("..", "bin")
	}
	dir := filepath.Join(bin, "crds-flux")
	if _, err := os.Stat(filepath.Join(dir, "notification.toolkit.fluxcd.io_providers.yaml")); err != nil {
		t.Fatalf("notification-controller CRDs not found in %s: run `make tools` first", dir)
	}
	return dir
}

func TestFluxManifests(t *testing.T) {
	objs := build(t, "flux")
	provider := find(t, objs, "Provider", "syncmedic")
	alert := find(t, objs, "Alert", "syncmedic")

	t.Run("the Provider signs with generic-hmac and posts to the receiver Service of base", func(t *testing.T) {
		base := build(t, "base")
		var svc corev1.Service
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, base, "Service", "syncmedic").Object, &svc))
		typ, _, _ := unstructured.NestedString(provider.Object, "spec", "type")
		addr, _, _ := unstructured.NestedString(provider.Object, "spec", "address")
		require.Equal(t, "generic-hmac", typ)
		require.Equal(t, "http://"+svc.Name+"."+svc.Namespace+".svc.cluster.local:9292"+flux.EventsPath, addr)
		require.Equal(t, int32(9292), svc.Spec.Ports[0].Port)
		require.Equal(t, "flux-system", provider.GetNamespace())
	})

	t.Run("the Alert sends the HelmRelease and Kustomization events of every severity, and nothing no rule reads", func(t *testing.T) {
		sev, _, _ := unstructured.NestedString(alert.Object, "spec", "eventSeverity")
		require.Equal(t, "info", sev)
		srcs, _, _ := unstructured.NestedSlice(alert.Object, "spec", "eventSources")
		var kinds []string
		for _, s := range srcs {
			m := s.(map[string]interface{})
			kinds = append(kinds, m["kind"].(string)+"/"+m["name"].(string))
		}
		require.Equal(t, []string{"HelmRelease/*", "Kustomization/*"}, kinds)
	})

	t.Run("the Secret layout matches the Provider's secretRef and the keys the Deployment reads", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("flux", "secret-layout.yaml"))
		require.NoError(t, err)
		var secrets []corev1.Secret
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var s corev1.Secret
			require.NoError(t, yaml.Unmarshal([]byte(doc), &s))
			secrets = append(secrets, s)
		}
		require.Len(t, secrets, 2)
		ref, _, _ := unstructured.NestedString(provider.Object, "spec", "secretRef", "name")
		require.Equal(t, ref, secrets[0].Name)
		require.Equal(t, "flux-system", secrets[0].Namespace)
		require.Contains(t, secrets[0].StringData, "token")

		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, build(t, "base"), "Deployment", "syncmedic").Object, &d))
		require.Equal(t, d.Spec.Template.Spec.Volumes[0].Secret.SecretName, secrets[1].Name)
		require.Equal(t, d.Namespace, secrets[1].Namespace)
		for key := range secrets[1].StringData {
			require.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--"+key+"-file=/etc/syncmedic/secrets/"+key)
		}
	})

	t.Run("everything applies to a real apiserver with Flux's CRDs", func(t *testing.T) {
		env := testenv.Kube(t)
		_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{fluxCRDs(t)}, ErrorIfPathMissing: true})
		require.NoError(t, err)
		_, err = env.Clientset.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		apply(t, env.Client, objs)
	})
}
