package cmp

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

func TestLoadChartLimits(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string // empty: the chart loads
	}{
		{"subchart archives within the limits load", map[string]string{
			"charts/small-0.1.0.tgz": "", // filled below
		}, ""},
		{"archives that decompress past the chart limit together", map[string]string{
			"charts/wide-0.1.0.tgz": "",
		}, fmt.Sprintf("chart archive charts/wide-0.1.0.tgz: decompresses to more than the %d MiB chart limit", MaxChartSize>>20)},
		{"a schema $ref to a URL", map[string]string{
			"values.schema.json": `{"properties": {"a": {"$ref": "https://example.com/schema.json"}}}`,
		}, `chart leak: values.schema.json: $ref "https://example.com/schema.json" is not local to the schema`},
		{"a schema $ref to a file", map[string]string{
			"values.schema.json": `{"properties": {"a": {"$ref": "other.json#/x"}}}`,
		}, `$ref "other.json#/x" is not local to the schema`},
		{"a schema with too many $refs", map[string]string{
			"values.schema.json": `{"definitions": {"x": {"type": "string"}}, "properties": {` +
				strings.TrimSuffix(strings.Repeat(`"p": {"$ref": "#/definitions/x"},`, 1), ",") + `}, "allOf": [` +
				strings.TrimSuffix(strings.Repeat(`{"$ref": "#/definitions/x"},`, MaxSchemaRefs), ",") + `]}`,
		}, fmt.Sprintf("values.schema.json: has more than %d $refs", MaxSchemaRefs)},
		{"a schema nested too deeply", map[string]string{
			"values.schema.json": strings.Repeat(`{"not": `, MaxSchemaDepth+1) + "{}" + strings.Repeat("}", MaxSchemaDepth+1),
		}, fmt.Sprintf("values.schema.json: nests deeper than %d levels", MaxSchemaDepth)},
		{"a schema with local $refs loads", map[string]string{
			"values.schema.json": `{"definitions": {"x": {"type": "string"}}, "properties": {"leaked": {"$ref": "#/definitions/x"}}}`,
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, leakChart)
			for name := range tt.files {
				switch name {
				case "charts/small-0.1.0.tgz":
					tt.files[name] = string(bombArchive(t, "small", 2, 1<<20))
				case "charts/wide-0.1.0.tgz":
					tt.files[name] = string(bombArchive(t, "wide", MaxChartSize/repofs.MaxFileSize+1, repofs.MaxFileSize))
				}
			}
			writeFiles(t, dir, tt.files)
			root, err := repofs.Open(dir)
			require.NoError(t, err)
			ch, err := loadChart(root, filepath.Join(root.Dir()))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "leak", ch.Name())
		})
	}
}

func TestLooksRemote(t *testing.T) {
	for entry, want := range map[string]bool{
		"https://example.com/cm.yaml":             true,
		"http://169.254.169.254/latest/meta-data": true,
		"github.com/example/deploy//base?ref=v1":  true,
		"GitHub.com/example/deploy":               true,
		"git@github.com:example/deploy.git":       true,
		"git::https://example.com/deploy.git":     true,
		"gh:example/deploy":                       true,
		"ssh://git@example.com/deploy.git":        true,
		"gitlab.com/example/deploy.git//base":     true,
		"example.com/deploy?ref=main":             true,
		"../base":                                 false,
		"./overlays/prod":                         false,
		"deployment.yaml":                         false,
		"configs/github.com.yaml":                 false,
		"team@example/values.yaml":                true, // user@host: kustomize's git parser takes it
	} {
		require.Equal(t, want, looksRemote(entry), entry)
	}
}
