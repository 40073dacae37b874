package cmp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitStream(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		docs    int
		sources []string
	}{
		{"a single document without separator", "kind: A\n", 1, []string{""}},
		{"helm template output keeps each # Source comment with its document",
			"---\n# Source: c/templates/a.yaml\nkind: A\n---\n# Source: c/templates/b.yaml\nkind: B\n", 2, []string{"c/templates/a.yaml", "c/templates/b.yaml"}},
		{"a separator with a trailing comment still separates", "kind: A\n--- # next\nkind: B", 2, []string{"", ""}},
		{"an indented --- inside a block scalar does not separate", "kind: A\ndata:\n  x: |\n    ---\n    y\n", 1, []string{""}},
		{"---x at column 0 is not a separator", "kind: A\n---x: 1\n", 1, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := SplitStream([]byte(tt.in))
			require.Len(t, docs, tt.docs)
			require.Equal(t, tt.in, string(JoinStream(docs)))
			var sources []string
			for _, d := range docs {
				sources = append(sources, d.Source)
			}
			require.Equal(t, tt.sources, sources)
		})
	}
}

func TestParseUnpacksLists(t *testing.T) {
	docs := SplitStream([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: Job\n  metadata:\n    name: a\n  spec:\n    ttlSecondsAfterFinished: 3\n"))
	require.NoError(t, Parse(docs))
	require.Len(t, docs[0].Objects, 1)
	require.Equal(t, "a", docs[0].Objects[0].GetName())
	require.Equal(t, int64(3), docs[0].Objects[0].Object["spec"].(map[string]interface{})["ttlSecondsAfterFinished"], "integers stay int64")
}

// FuzzRenderedStream feeds arbitrary rendered output through everything generate does after rendering: splitting
// must be lossless, and parse, lint, fix and annotate must never panic.
func FuzzRenderedStream(f *testing.F) {
	f.Add("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: a\n  annotations:\n    argocd.argoproj.io/hook: PreSync\nspec:\n  ttlSecondsAfterFinished: 0\n")
	f.Add("---\n# Source: x\n{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"s\"}}]}\n")
	f.Fuzz(func(t *testing.T, s string) {
		docs := SplitStream([]byte(s))
		require.Equal(t, s, string(JoinStream(docs)))
		if Parse(docs) != nil {
			return
		}
		hs := Lint(docs, LintOptions{AppNamespace: "default"})
		all := Params{Fixes: map[Fix]bool{FixDeletePolicy: true, FixKnativeOwnership: true}}
		if ApplyFixes(docs, hs, all) != nil {
			return
		}
		_ = Annotate(docs, hs)
	})
}
