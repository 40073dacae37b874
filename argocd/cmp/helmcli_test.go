package cmp

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// loadHelm and render make the calls of Helm's client-only install itself (without helm's pkg/action): its output must stay
// what the real helm CLI prints for `helm template --include-crds`, document for document, CRDs, install order,
// hooks, values, --set, --kube-version and --api-versions included.
func TestHelmRenderingIsWhatTheHelmCLIPrints(t *testing.T) {
	tests := []struct {
		name  string
		dir   string
		env   []string
		flags []string
		shows []string // what the rendering must contain, beside being helm's
	}{
		{"a chart with a hook renders as helm template renders it", app("helm-clean"), nil, nil, []string{"helm.sh/hook: pre-upgrade,pre-install"}},
		// The ordered chart prints .Capabilities.KubeVersion, whose default depends on how helm was built (the CLI
		// says its client-go's version, the library v1.20.0): Argo CD always sets KUBE_VERSION, so the cases do too.
		{"a chart with CRDs, NOTES, partials, weighted hooks and mixed kinds renders in helm's order",
			filepath.Join("testdata", "helmcli", "ordered"), []string{EnvKubeVersion + "=1.31.0"}, []string{"--kube-version", "1.31.0"},
			[]string{"# Source: ordered/crds/widgets.yaml", `capabilities: "v1.31.0"`, "replicas: 1"}},
		{"values files, set overrides, the kube version and API versions reach the templates as with helm's flags",
			filepath.Join("testdata", "helmcli", "ordered"),
			[]string{EnvKubeVersion + "=1.29.4", EnvAPIVersions + "=example.com/v1,example.com/v1/Widget",
				`ARGOCD_APP_PARAMETERS=[{"name":"values-files","array":["values-prod.yaml"]},{"name":"set","map":{"greeting":"hi there"}}]`},
			[]string{"--kube-version", "1.29.4", "--api-versions", "example.com/v1", "--api-versions", "example.com/v1/Widget",
				"--values", filepath.Join("testdata", "helmcli", "ordered", "values-prod.yaml"), "--set", "greeting=hi there"},
			[]string{"replicas: 3", `greeting: "hi there"`, `capabilities: "v1.29.4"`, `widgets: "served"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := params("shop", tt.env...)
			h, err := loadHelm(testRoot(t, tt.dir), tt.dir, p)
			require.NoError(t, err)
			docs, err := h.render(context.Background())
			require.NoError(t, err)

			args := []string{"template", "shop", tt.dir, "--include-crds", "--namespace", "shop"}
			args = append(args, tt.flags...)
			cmd := testenv.HelmCommand(t, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, stderr.String())

			want := SplitStream(out)
			require.Equal(t, docTexts(want), docTexts(docs))
			require.NotEmpty(t, want)
			all := strings.Join(docTexts(docs), "\n")
			for _, w := range tt.shows {
				require.Contains(t, all, w)
			}
			require.NotContains(t, all, "Installed shop", "NOTES.txt is not a manifest")
			require.NotContains(t, all, "partial", "a partial renders nothing")
		})
	}
}

// docTexts is each document as "source: text", trimmed.
func docTexts(docs []Doc) []string {
	var out []string
	for _, d := range docs {
		if s := strings.TrimSpace(string(d.Raw)); s != "" {
			out = append(out, d.Source+": "+s)
		}
	}
	return out
}
