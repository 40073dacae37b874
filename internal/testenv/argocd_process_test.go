package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The newest version's CRDs are installed for every version in a test binary (installArgoCDCRDs): they must keep
// every field the older versions' CRDs define, or the apiserver would prune what an older controller writes.
func TestArgoCDCRDsKeepOlderVersionsFields(t *testing.T) {
	if testing.Short() {
		t.Skip("reads bin/crds-argocd-* (make tools-argocd); skipped under -short")
	}
	bin, err := BinDir()
	require.NoError(t, err)
	newest := filepath.Join(bin, "crds-argocd-"+argoCDCRDVersion)
	for _, older := range []string{ArgoCDV2, ArgoCDV3Leaky} {
		for _, file := range []string{"application-crd.yaml", "appproject-crd.yaml", "applicationset-crd.yaml"} {
			t.Run(older+" "+file+" has no field the "+argoCDCRDVersion+" schema prunes", func(t *testing.T) {
				oldPath := filepath.Join(bin, "crds-argocd-"+older, file)
				if _, err := os.Stat(oldPath); err != nil {
					t.Fatalf("%s not built: run `make tools-argocd`", oldPath)
				}
				if _, err := os.Stat(filepath.Join(newest, file)); err != nil {
					t.Fatalf("%s not built: run `make tools-argocd`", newest)
				}
				oldSchema, newSchema := crdSchema(t, oldPath), crdSchema(t, filepath.Join(newest, file))
				require.NotEmpty(t, oldSchema.Properties["spec"].Properties, "the schema was read")
				var missing []string
				missingFields("", oldSchema, newSchema, &missing)
				require.Empty(t, missing, "fields of %s %s absent from %s's schema", older, file, argoCDCRDVersion)
			})
		}
	}
}

func crdSchema(t *testing.T, path string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(data, &crd))
	require.NotEmpty(t, crd.Spec.Versions)
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// missingFields appends the paths of old's properties that new neither defines nor preserves as unknown fields.
func missingFields(path string, old, new *apiextensionsv1.JSONSchemaProps, missing *[]string) {
	if old == nil || new == nil || (new.XPreserveUnknownFields != nil && *new.XPreserveUnknownFields) {
		return
	}
	if new.AdditionalProperties != nil && new.AdditionalProperties.Schema != nil && len(new.Properties) == 0 {
		if old.AdditionalProperties != nil {
			missingFields(path+".*", old.AdditionalProperties.Schema, new.AdditionalProperties.Schema, missing)
		}
		return
	}
	for name, o := range old.Properties {
		n, ok := new.Properties[name]
		if !ok {
			*missing = append(*missing, path+"."+name)
			continue
		}
		missingFields(path+"."+name, &o, &n, missing)
	}
	if old.Items != nil && old.Items.Schema != nil && new.Items != nil {
		missingFields(path+"[]", old.Items.Schema, new.Items.Schema, missing)
	}
}

// One real stack per version: argocd-server answers the API with the version stamped into the binary, admin logs
// in, and the application controller syncs an app from a local git repository.
func TestArgoCDStackSyncsFromGit(t *testing.T) {
	env := KubeWithControllers(t)
	for _, version := range []string{ArgoCDV2, ArgoCDV3} {
		t.Run(version+" syncs a ConfigMap and a PreSync hook from git", func(t *testing.T) {
			if _, err := ArgoCDBinary(version); err != nil {
				t.Fatal(err) // names `make tools-argocd`
			}
			stack := ArgoCDStack(t, env, ArgoCDStackOptions{Version: version})
			t.Logf("Argo CD %s stack started in %s", version, stack.StartedIn.Round(100*time.Millisecond))
			closer, versions, err := stack.Client(t, stack.cachedAdminToken(t)).NewVersionClient()
			require.NoError(t, err)
			defer closeQuietly(closer)
			v, err := versions.Version(t.Context(), nil)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(v.Version, version), "server version %q", v.Version)

			app := NewRealHookApp(t, stack, "smoke", ConfigMapData{Data: map[string]string{"k": "v"}},
				RealHook{Name: "pre", TTL: TTL(30), Run: PodSucceeds})
			app.Sync(t)
			got, ok := app.WaitApp(t, 2*time.Minute, OperationCompleted)
			require.True(t, ok, "operation not finished: %s", DescribeOperation(got))
			require.Equal(t, "Succeeded", string(got.Status.OperationState.Phase), DescribeOperation(got))
			require.Len(t, got.Status.OperationState.SyncResult.Resources, 2, DescribeOperation(got))
		})
	}
}
