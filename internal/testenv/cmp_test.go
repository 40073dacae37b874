package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const catPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: cat
spec:
  version: v1.0
  generate:
    command: [sh, -c]
    args:
      - |
        cat *.yaml
        printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: env\ndata:\n  app: "%s"\n  param: "%s"\n' "$ARGOCD_APP_NAME" "$PARAM_REPLICAS"
`

const failingPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: failing
spec:
  generate:
    command: [sh, -c, 'echo "strict mode: hook Job has no delete policy" >&2; exit 3']
`

func TestCMPServer(t *testing.T) {
	appDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(appDir, "deploy.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-repo\n"), 0o600))

	t.Run("a directory round-trips through a real generate command with the app's environment", func(t *testing.T) {
		cmp := CMPServer(t, catPlugin)
		manifests, err := cmp.Generate(t, appDir, map[string]string{"ARGOCD_APP_NAME": "guestbook", "PARAM_REPLICAS": "3"})
		require.NoError(t, err)
		require.Len(t, manifests, 2)
		var fromRepo, env struct {
			Metadata struct{ Name string }
			Data     map[string]string
		}
		require.NoError(t, yaml.Unmarshal([]byte(manifests[0]), &fromRepo))
		require.Equal(t, "from-repo", fromRepo.Metadata.Name)
		require.NoError(t, yaml.Unmarshal([]byte(manifests[1]), &env))
		require.Equal(t, map[string]string{"app": "guestbook", "param": "3"}, env.Data)
	})

	t.Run("a failing command's stderr is the error Argo CD would show", func(t *testing.T) {
		cmp := CMPServer(t, failingPlugin)
		_, err := cmp.Generate(t, appDir, map[string]string{"ARGOCD_APP_NAME": "guestbook"})
		require.ErrorContains(t, err, "strict mode: hook Job has no delete policy")
	})
}
