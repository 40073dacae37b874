package cmp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseParams(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    Params
		wantErr string
	}{
		{"nothing set means lint only", []string{"ARGOCD_APP_NAME=shop", "ARGOCD_APP_NAMESPACE=web"},
			Params{AppName: "shop", AppNamespace: "web", Fixes: map[Fix]bool{}}, ""},
		{"PARAM_ variables are read when Argo CD's JSON is absent",
			[]string{"PARAM_STRICT=true", "PARAM_ANNOTATE=1", "PARAM_FIX=delete-policy", "PARAM_VALUES_FILES=a.yaml, b.yaml", "PARAM_RELEASE_NAME=rel"},
			Params{Strict: true, Annotate: true, Fixes: map[Fix]bool{FixDeletePolicy: true}, ValuesFiles: []string{"a.yaml", "b.yaml"}, ReleaseName: "rel"}, ""},
		{"array parameters come in index order", []string{"PARAM_VALUES_FILES_1=b.yaml", "PARAM_VALUES_FILES_0=a.yaml", "PARAM_VALUES_FILES_X=c.yaml", "PARAM_FIX_0=all"},
			Params{Fixes: map[Fix]bool{FixDeletePolicy: true, FixKnativeOwnership: true}, ValuesFiles: []string{"a.yaml", "b.yaml"}}, ""},
		{"ARGOCD_APP_PARAMETERS wins and keeps map keys unescaped",
			[]string{"PARAM_STRICT=true", `ARGOCD_APP_PARAMETERS=[{"name":"strict","string":"false"},{"name":"set","map":{"image.tag":"v2"}},{"name":"fix","array":["knative-ownership"]}]`},
			Params{Fixes: map[Fix]bool{FixKnativeOwnership: true}, Set: map[string]string{"image.tag": "v2"}}, ""},
		{"Helm capabilities come from the build environment", []string{"KUBE_VERSION=1.31", "KUBE_API_VERSIONS=v1,apps/v1"},
			Params{KubeVersion: "1.31", APIVersions: []string{"v1", "apps/v1"}, Fixes: map[Fix]bool{}}, ""},
		{"a non-boolean strict is refused with the fix", []string{"PARAM_STRICT=yes please"}, Params{}, `parameter strict: "yes please" is not a boolean: use true or false`},
		{"an unknown fix is refused naming the known ones", []string{"PARAM_FIX=everything"}, Params{}, `unknown fix "everything": use delete-policy, knative-ownership or all`},
		{"broken parameter JSON is refused", []string{"ARGOCD_APP_PARAMETERS=[{"}, Params{}, "ARGOCD_APP_PARAMETERS is not the JSON list Argo CD writes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseParams(tt.env)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseParams(f *testing.F) {
	f.Add("PARAM_STRICT=true\nPARAM_FIX=all")
	f.Add(`ARGOCD_APP_PARAMETERS=[{"name":"values","string":"a: 1"},{"name":"values-files","array":["x.yaml"]},{"name":"set","map":{"a.b":"c"}}]`)
	f.Add("PARAM_VALUES_FILES_0=a\nPARAM_VALUES_FILES_10=b\nPARAM_VALUES_FILES_01=c")
	f.Fuzz(func(t *testing.T, s string) {
		env := splitLines(s)
		p, err := ParseParams(env)
		if err != nil {
			return
		}
		for fix := range p.Fixes {
			require.Contains(t, AllFixes, fix)
		}
		for _, v := range p.ValuesFiles {
			require.NotEmpty(t, v)
		}
	})
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
