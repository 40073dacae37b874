package cmp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/gitops-engine/pkg/utils/kube"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// pluginYAML returns the plugin.yaml of manifests/argocd-cmp with its command pointing at bin.
func pluginYAML(t *testing.T, bin string) string {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join("..", "..", "manifests", "argocd-cmp", "plugin.yaml"))), &cm))
	p := cm.Data["plugin.yaml"]
	require.Contains(t, p, "/usr/local/bin/syncmedic")
	return strings.ReplaceAll(p, "/usr/local/bin/syncmedic", bin)
}

// buildSyncmedic builds the syncmedic command into a temporary directory.
func buildSyncmedic(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "syncmedic")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/syncmedic/syncmedic/cmd/syncmedic")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// split returns the documents the cmp-server returns for a stream.
func split(t *testing.T, stream string) []string {
	t.Helper()
	docs, err := kube.SplitYAMLToString([]byte(stream))
	require.NoError(t, err)
	return docs
}

// TestPluginInTheRealCMPServer runs `syncmedic cmp generate` as the plugin of Argo CD's own cmp-server, configured
// with the plugin.yaml of manifests/argocd-cmp, and sends it apps the way the repo-server does.
func TestPluginInTheRealCMPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: needs the cmp-server and a go build")
	}
	cmpSrv := testenv.CMPServer(t, pluginYAML(t, buildSyncmedic(t)))
	env := func(ns string, kv ...string) map[string]string {
		m := map[string]string{EnvAppName: "shop", EnvAppNamespace: ns}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	absApp := func(name string) string {
		dir, err := filepath.Abs(app(name))
		require.NoError(t, err)
		return dir
	}

	t.Run("clean apps pass through unchanged", func(t *testing.T) {
		for _, dir := range []string{"plain-clean", "kustomize-clean", "helm-clean"} {
			t.Run(dir, func(t *testing.T) {
				// What the renderers alone produce, checked byte for byte against the files, kustomize and
				// helm template in TestGenerateClean.
				r := generate(t, app(dir), params("shop"))
				require.NoError(t, r.err)
				for _, e := range []map[string]string{
					env("shop"),
					env("shop", "PARAM_STRICT", "true", "PARAM_ANNOTATE", "true", "PARAM_FIX", "all"),
				} {
					got, err := cmpSrv.Generate(t, absApp(dir), e)
					require.NoError(t, err)
					require.Equal(t, split(t, r.stdout), got)
				}
			})
		}
	})

	t.Run("each hazard is reported on its object when annotate is on", func(t *testing.T) {
		tests := []struct {
			dir, ns string
			want    map[string]string
		}{
			{"plain-hazards", "default", map[string]string{
				"Job/db-migrate":            "hook-no-delete-policy,hook-immutable-template",
				"Job/kyverno-clean-reports": "hook-fast-finish",
				"Job/smoke-*":               "hook-fast-finish",
				"Deployment/webhook":        "webhook-namespace-owned",
				"ValidatingWebhookConfiguration/validation.webhook.serving.knative.dev": "webhook-namespace-owned,webhook-fail-same-app",
			}},
			{"kustomize-hazards", "payments", map[string]string{
				"Job/schema-upgrade":                              "hook-no-delete-policy,hook-immutable-template",
				"MutatingWebhookConfiguration/payments-defaulter": "webhook-fail-same-app",
			}},
			{"helm-hazards", "reports", map[string]string{
				"Job/shop-seed":   "hook-immutable-template",
				"Job/shop-notify": "hook-no-delete-policy,hook-immutable-template,hook-fast-finish",
			}},
		}
		for _, tt := range tests {
			t.Run(tt.dir, func(t *testing.T) {
				got, err := cmpSrv.Generate(t, absApp(tt.dir), env(tt.ns, "PARAM_ANNOTATE", "true"))
				require.NoError(t, err)
				docs := SplitStream([]byte(strings.Join(got, "\n---\n")))
				require.NoError(t, Parse(docs))
				annotated := map[string]string{}
				for _, d := range docs {
					for _, o := range d.Objects {
						if v, ok := o.GetAnnotations()[HazardsAnnotation]; ok {
							annotated[o.GetKind()+"/"+objName(o)] = v
						}
					}
				}
				require.Equal(t, tt.want, annotated)
			})
		}
	})

	t.Run("without annotate the hazards leave the manifests unchanged", func(t *testing.T) {
		r := generate(t, app("plain-hazards"), params("default"))
		require.NoError(t, r.err)
		got, err := cmpSrv.Generate(t, absApp("plain-hazards"), env("default"))
		require.NoError(t, err)
		require.Equal(t, split(t, r.stdout), got)
	})

	t.Run("strict mode fails with each object and its fix in the error Argo CD shows", func(t *testing.T) {
		_, err := cmpSrv.Generate(t, absApp("kustomize-hazards"), env("payments", "PARAM_STRICT", "true"))
		require.Error(t, err)
		msg := err.Error()
		for _, want := range []string{
			"strict mode: 3 hazard(s)",
			"- hook-no-delete-policy: Job payments/schema-upgrade",
			"fix: add annotation argocd.argoproj.io/hook-delete-policy: BeforeHookCreation",
			"- hook-immutable-template: Job payments/schema-upgrade",
			"fix: use metadata.generateName",
			"- webhook-fail-same-app: MutatingWebhookConfiguration payments-defaulter",
			"fix: set failurePolicy: Ignore",
		} {
			require.Contains(t, msg, want)
		}
	})

	t.Run("strict mode passes once the opt-in fix removed the only hazard", func(t *testing.T) {
		dir := t.TempDir()
		job := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n  annotations:\n    argocd.argoproj.io/hook: PreSync\n" +
			"spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: m\n          image: example.com/m:1\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(job), 0o644))
		_, err := cmpSrv.Generate(t, dir, env("shop", "PARAM_STRICT", "true"))
		require.ErrorContains(t, err, "hook-no-delete-policy: Job migrate-*")
		got, err := cmpSrv.Generate(t, dir, env("shop", "PARAM_STRICT", "true", "PARAM_FIX", "delete-policy"))
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Contains(t, got[0], `"argocd.argoproj.io/hook-delete-policy":"BeforeHookCreation"`)
	})
}
