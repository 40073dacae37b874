package manifests

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// build runs kustomize on dir and returns the objects.
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	out, err := testenv.KustomizeBuild(abs)
	require.NoError(t, err)
	return out
}

// find returns the object of kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the build", kind, name)
	return nil
}

// apply server-side applies objs in order, as `kubectl apply --server-side` does.
func apply(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		o = o.DeepCopy()
		err := c.Patch(context.Background(), o, client.Apply, client.FieldOwner("syncmedic-manifests-test"), client.ForceOwnership)
		require.NoError(t, err, "apply %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// writeKustomization writes files into a new directory and returns it.
func writeKustomization(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}
