package cmp

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/gitops-engine/pkg/utils/kube"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func app(name string) string { return filepath.Join("testdata", "apps", name) }

func params(ns string, kv ...string) Params {
	env := []string{EnvAppName + "=shop", EnvAppNamespace + "=" + ns}
	env = append(env, kv...)
	p, err := ParseParams(env)
	if err != nil {
		panic(err)
	}
	return p
}

type run struct {
	stdout, stderr string
	res            Result
	err            error
}

func generate(t *testing.T, dir string, p Params) run {
	t.Helper()
	var out, errOut bytes.Buffer
	res, err := Generate(context.Background(), testRoot(t, dir), dir, p, &out, &errOut)
	return run{stdout: out.String(), stderr: errOut.String(), res: res, err: err}
}

// golden compares got with testdata/golden/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create the golden file")
	require.Equal(t, string(want), got)
}

// testRoot returns the repository dir is in, as the generate command finds it outside the cmp-server.
func testRoot(t *testing.T, dir string) *repofs.Root {
	t.Helper()
	root, err := repofs.Find(dir, nil)
	require.NoError(t, err)
	return root
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestGenerateClean(t *testing.T) {
	kustomized := func(t *testing.T) string {
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), app("kustomize-clean"))
		require.NoError(t, err)
		b, err := m.AsYaml()
		require.NoError(t, err)
		return string(b)
	}
	tests := []struct {
		name   string
		dir    string
		source SourceType
		want   func(t *testing.T) string
	}{
		{"a plain directory is its files' bytes joined by separators", "plain-clean", SourceDirectory, func(t *testing.T) string {
			return readFile(t, app("plain-clean/a-deployment.yaml")) + "---\n" + readFile(t, app("plain-clean/b-config.json")) + "\n" +
				readFile(t, app("plain-clean/c-service.yml"))
		}},
		{"a kustomization is exactly what kustomize build prints", "kustomize-clean", SourceKustomize, kustomized},
		{"a helm chart is exactly what helm template prints", "helm-clean", SourceHelm, func(t *testing.T) string {
			return readFile(t, filepath.Join("testdata", "golden", "helm-clean.yaml"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := generate(t, app(tt.dir), params("shop"))
			require.NoError(t, r.err)
			require.Equal(t, tt.source, r.res.Source)
			if tt.source == SourceHelm {
				golden(t, "helm-clean.yaml", r.stdout)
			}
			require.Equal(t, tt.want(t), r.stdout)
			require.Empty(t, r.res.Hazards)
			require.Empty(t, r.stderr)
			manifests, err := kube.SplitYAMLToString([]byte(r.stdout))
			require.NoError(t, err, "Argo CD's cmp-server must be able to split the output")
			require.NotEmpty(t, manifests)
		})
	}
}

func TestGenerateAnnotateAndStrictLeaveCleanAppsAlone(t *testing.T) {
	for _, dir := range []string{"plain-clean", "kustomize-clean", "helm-clean"} {
		t.Run(dir+" is unchanged with every option on", func(t *testing.T) {
			plain := generate(t, app(dir), params("shop"))
			require.NoError(t, plain.err)
			all := generate(t, app(dir), params("shop", "PARAM_STRICT=true", "PARAM_ANNOTATE=true", "PARAM_FIX=all"))
			require.NoError(t, all.err)
			require.Equal(t, plain.stdout, all.stdout)
		})
	}
}

// hazardList renders hazards as "id object" lines.
func hazardList(hs []Hazard) []string {
	var out []string
	for _, h := range hs {
		out = append(out, string(h.ID)+" "+h.Object.String())
	}
	return out
}

func TestLintReportsEachHazard(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		ns   string
		want []string
	}{
		{"a plain directory with the seed incidents' manifests", "plain-hazards", "default", []string{
			"hook-no-delete-policy Job db-migrate (jobs.yaml)",
			"hook-immutable-template Job db-migrate (jobs.yaml)",
			"hook-fast-finish Job kyverno-clean-reports (jobs.yaml)",
			"hook-fast-finish Job smoke-* (jobs.yaml)",
			"webhook-namespace-owned Deployment knative-serving/webhook (knative.yaml)",
			"webhook-namespace-owned ValidatingWebhookConfiguration validation.webhook.serving.knative.dev (knative.yaml)",
			"webhook-fail-same-app ValidatingWebhookConfiguration validation.webhook.serving.knative.dev (knative.yaml)",
		}},
		{"a kustomization whose webhook defaults to failurePolicy Fail", "kustomize-hazards", "payments", []string{
			"hook-no-delete-policy Job payments/schema-upgrade",
			"hook-immutable-template Job payments/schema-upgrade",
			"webhook-fail-same-app MutatingWebhookConfiguration payments-defaulter",
		}},
		{"a helm chart whose hook template changes on every render", "helm-hazards", "reports", []string{
			"hook-immutable-template Job shop-seed (reports/templates/hooks.yaml)",
			"hook-no-delete-policy Job shop-notify (reports/templates/hooks.yaml)",
			"hook-immutable-template Job shop-notify (reports/templates/hooks.yaml)",
			"hook-fast-finish Job shop-notify (reports/templates/hooks.yaml)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := generate(t, app(tt.dir), params(tt.ns))
			require.NoError(t, r.err)
			require.Equal(t, tt.want, hazardList(r.res.Hazards))
			golden(t, tt.dir+".stderr", r.stderr)
			src, docs, err := Render(context.Background(), testRoot(t, app(tt.dir)), app(tt.dir), params(tt.ns))
			require.NoError(t, err)
			if src != SourceHelm { // a chart with randAlphaNum renders differently every time
				require.Equal(t, string(JoinStream(docs)), r.stdout, "lint alone must not change the manifests")
			}
		})
	}
}

func TestStrictModeFailsNamingObjectAndFix(t *testing.T) {
	r := generate(t, app("plain-hazards"), params("default", "PARAM_STRICT=true"))
	var strict *StrictError
	require.True(t, errors.As(r.err, &strict), "got %v", r.err)
	require.Empty(t, r.stdout, "strict mode prints no manifests when it fails")
	require.Len(t, strict.Hazards, 7)
	msg := r.err.Error()
	require.Contains(t, msg, "hook-no-delete-policy: Job db-migrate (jobs.yaml)")
	require.Contains(t, msg, "fix: add annotation argocd.argoproj.io/hook-delete-policy: BeforeHookCreation")
	golden(t, "plain-hazards.strict", msg)

	t.Run("strict passes once the fixes remove every hazard left", func(t *testing.T) {
		r := generate(t, app("kustomize-hazards"), params("payments", "PARAM_STRICT=true", "PARAM_FIX=all"))
		require.Error(t, r.err, "the immutable-template and webhook hazards have no automatic fix")
		require.NotContains(t, r.err.Error(), "- hook-no-delete-policy:")
	})
}

func TestFixes(t *testing.T) {
	plain := generate(t, app("plain-hazards"), params("default"))
	require.NoError(t, plain.err)
	fixed := generate(t, app("plain-hazards"), params("default", "PARAM_FIX=delete-policy,knative-ownership"))
	require.NoError(t, fixed.err)

	before, after := SplitStream([]byte(plain.stdout)), SplitStream([]byte(fixed.stdout))
	require.Len(t, after, len(before))
	var changed []int
	for i := range before {
		if string(before[i].Raw) != string(after[i].Raw) {
			changed = append(changed, i)
		}
	}
	require.Equal(t, []int{0, 4}, changed, "only the hook Job without a policy and the Knative Deployment change")
	require.NoError(t, Parse(after))
	job := after[0].Objects[0]
	require.Equal(t, "BeforeHookCreation", job.GetAnnotations()["argocd.argoproj.io/hook-delete-policy"])
	require.True(t, strings.HasPrefix(string(after[0].Raw), "# The migration runs before every sync.\n"), "leading comments stay")
	require.Contains(t, string(after[4].Raw), "- name: WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP\n              value: \"true\"\n")
	golden(t, "plain-hazards.fixed.stderr", fixed.stderr)

	var fixedIDs []string
	for _, h := range fixed.res.Hazards {
		if h.Fixed {
			fixedIDs = append(fixedIDs, string(h.ID)+" "+h.Object.Name)
		}
	}
	require.Equal(t, []string{"hook-no-delete-policy db-migrate", "webhook-namespace-owned webhook"}, fixedIDs)

	t.Run("fixing twice changes nothing more", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(fixed.stdout), 0o644))
		again := generate(t, dir, params("default", "PARAM_FIX=all"))
		require.NoError(t, again.err)
		require.Equal(t, fixed.stdout, again.stdout)
	})
}

func TestAnnotateNamesTheHazardsOnTheObjects(t *testing.T) {
	r := generate(t, app("plain-hazards"), params("default", "PARAM_ANNOTATE=true", "PARAM_FIX=delete-policy"))
	require.NoError(t, r.err)
	docs := SplitStream([]byte(r.stdout))
	require.NoError(t, Parse(docs))
	got := map[string]string{}
	for _, d := range docs {
		for _, o := range d.Objects {
			if v, ok := o.GetAnnotations()[HazardsAnnotation]; ok {
				got[o.GetKind()+" "+objName(o)] = v
			}
		}
	}
	require.Equal(t, map[string]string{
		"Job db-migrate":            "hook-immutable-template",
		"Job kyverno-clean-reports": "hook-fast-finish",
		"Job smoke-*":               "hook-fast-finish",
		"Deployment webhook":        "webhook-namespace-owned",
		"ValidatingWebhookConfiguration validation.webhook.serving.knative.dev": "webhook-namespace-owned,webhook-fail-same-app",
	}, got)
	require.Contains(t, r.stdout, "kind: Service\nmetadata:\n  name: webhook\n  namespace: knative-serving\n", "a clean object keeps its bytes")
}

func TestGenerateErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		p     Params
		want  string
	}{
		{"invalid YAML names the file", map[string]string{"bad.yaml": "kind: [unclosed\n"}, params("x"), "document 1 (bad.yaml)"},
		{"an object without a kind is an error", map[string]string{"a.yaml": "metadata:\n  name: x\n"}, params("x"), "object has no kind"},
		{"a values file outside the app is refused", map[string]string{"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n"},
			params("x", "PARAM_VALUES_FILES=/etc/passwd"), `parameter values-files: "/etc/passwd" is an absolute path: values files must be regular files inside the repository`},
		{"a chart without a release name is refused", map[string]string{"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n"},
			Params{}, "no release name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			r := generate(t, dir, tt.p)
			require.ErrorContains(t, r.err, tt.want)
			require.Empty(t, r.stdout)
		})
	}
}

func TestHelmValuesFromParameters(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"values.yaml": "a: chart\nb: chart\nc: chart\nd: chart\n",
		"prod.yaml":   "b: file\nc: file\nd: file\n",
		"templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\n" +
			"data:\n  a: {{ .Values.a }}\n  b: {{ .Values.b }}\n  c: {{ .Values.c }}\n  d: {{ .Values.d }}\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	env := []string{EnvAppName + "=guestbook", EnvAppNamespace + "=web",
		EnvAppParameters + `=[{"name":"values-files","array":["prod.yaml"]},{"name":"values","string":"c: inline\nd: inline\n"},{"name":"set","map":{"d":"set"}}]`}
	p, err := ParseParams(env)
	require.NoError(t, err)
	r := generate(t, dir, p)
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "  name: guestbook\n  namespace: web\ndata:\n  a: chart\n  b: file\n  c: inline\n  d: set\n")
}
