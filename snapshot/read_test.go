package snapshot

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/syncmedic/syncmedic"
)

func TestAdd(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		content   string
		wantKinds []string
		wantProbs []string // "file:line: substring"
	}{
		{
			name:      "a kubectl List is expanded into its items",
			file:      "jobs.yaml",
			content:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: Job\n  metadata: {name: a, namespace: x}\n- apiVersion: batch/v1\n  kind: Job\n  metadata: {name: b, namespace: x}\n",
			wantKinds: []string{"Job", "Job"},
		},
		{
			name:      "multi-document YAML yields every document",
			file:      "multi.yaml",
			content:   "# dump\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n",
			wantKinds: []string{"Service", "Pod"},
		},
		{
			name:      "argocd app list -o json, an array of Applications without type metadata, is understood",
			file:      "apps.json",
			content:   `[{"metadata":{"name":"a","namespace":"argocd"},"spec":{"source":{"repoURL":"r"},"destination":{"namespace":"x"}}}]`,
			wantKinds: []string{"Application"},
		},
		{
			name:      "a typed List in JSON is expanded",
			file:      "hr.json",
			content:   `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmReleaseList","items":[{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"r","namespace":"a"}}]}`,
			wantKinds: []string{"HelmRelease"},
		},
		{
			name:      "a malformed document is reported with its file and line and the rest is read",
			file:      "bad.yaml",
			content:   "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: fine}\n",
			wantKinds: []string{"Service", "Pod"},
			wantProbs: []string{"bad.yaml:"},
		},
		{
			name:      "broken JSON is reported and nothing is invented",
			file:      "bad.json",
			content:   `{"apiVersion": "v1", "kind": `,
			wantProbs: []string{"bad.json: invalid JSON"},
		},
		{
			name:    "content that is not a Kubernetes object is skipped silently",
			file:    "values.yaml",
			content: "replicaCount: 2\nimage: {tag: latest}\n",
		},
		{
			name:      "an object without metadata is a problem",
			file:      "nometa.yaml",
			content:   "apiVersion: v1\nkind: Pod\n",
			wantProbs: []string{"nometa.yaml:1: v1 Pod has no metadata"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Snapshot{}
			s.Add(tt.file, []byte(tt.content))
			var kinds []string
			for _, o := range s.Objects {
				kinds = append(kinds, o.GetKind())
			}
			require.Equal(t, tt.wantKinds, kinds)
			require.Len(t, s.Problems, len(tt.wantProbs), "problems: %v", s.Problems)
			for i, p := range tt.wantProbs {
				require.Contains(t, s.Problems[i].String(), p)
			}
		})
	}
}

func TestMalformedDocumentLine(t *testing.T) {
	s := &Snapshot{}
	s.Add("bad.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: {a: [b}\n"))
	require.Len(t, s.Problems, 1)
	require.Equal(t, "bad.yaml", s.Problems[0].File)
	require.GreaterOrEqual(t, s.Problems[0].Line, 5, "the line points into the second document, not the first")
}

func TestHasKindOnlyForDumpedKinds(t *testing.T) {
	s := &Snapshot{}
	s.Add("a.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: n}\n"))
	require.True(t, s.HasKind(schema.GroupKind{Kind: "Service"}))
	require.False(t, s.HasKind(schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}))
	o := s.Observe()
	require.True(t, o.Inventory.ServicesKnown)
	require.False(t, o.Inventory.EndpointsKnown, "endpoints were not dumped, so no rule may claim they are missing")
}

func TestReadPathsExamples(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("the stuck example fires every rule of the catalog", func(t *testing.T) {
		s, err := ReadPaths("../examples/stuck-cluster")
		require.NoError(t, err)
		require.Empty(t, s.Problems)
		// Judged when the dump was taken (its README's --now): months later no controller has reconciled any of its
		// running operations, and argocd/controller-not-processing is then all there is to say about them.
		fs := Scan(s.Observe(), time.Date(2025, 6, 10, 14, 0, 0, 0, time.UTC), DefaultThresholds())
		got := map[syncmedic.RuleID]bool{}
		for _, f := range fs {
			got[f.Rule] = true
		}
		for _, r := range syncmedic.Rules() {
			require.True(t, got[r.ID], "rule %s did not fire", r.ID)
		}
	})
	t.Run("the healthy example fires nothing", func(t *testing.T) {
		s, err := ReadPaths("../examples/healthy-cluster")
		require.NoError(t, err)
		require.Empty(t, s.Problems)
		require.Empty(t, Scan(s.Observe(), now, DefaultThresholds()))
	})
	t.Run("a path that does not exist is an error", func(t *testing.T) {
		_, err := ReadPaths(filepath.Join(t.TempDir(), "missing"))
		require.Error(t, err)
	})
}

func TestObserveBuildsAppHooksAndVersions(t *testing.T) {
	s, err := ReadPaths("../examples/stuck-cluster")
	require.NoError(t, err)
	o := s.Observe()
	var shop bool
	for _, a := range o.Apps {
		require.Equal(t, "v2.14.3", a.ServerVersion, "the argocd-server image tag gives the version")
		if a.App.Name == "shop" {
			shop = true
			require.True(t, a.HooksKnown)
			require.Len(t, a.Hooks, 1)
			require.Equal(t, "migrate", a.Hooks[0].GetName())
		}
	}
	require.True(t, shop)
	require.Len(t, o.Releases, 6)
	require.Equal(t, "v0.36.2", o.Releases[0].ControllerVersion)
	require.Len(t, o.Inventory.WebhookCallFailures, 1)
	require.Len(t, o.AppSets, 1, "the ApplicationSet is kept and observed")
	require.Equal(t, "storefront", o.AppSets[0].AppSet.Name)
	require.Len(t, o.AppSets[0].AppSet.Status.ApplicationStatus, 3)
	require.Contains(t, o.AppSets[0].Apps, "storefront-us", "with the Applications of its namespace, by name")
	require.Equal(t, "Degraded", string(o.AppSets[0].Apps["storefront-us"].Status.Health.Status))
}

// FuzzRead feeds arbitrary bytes to the reader: it must never panic, and every object it returns has a kind.
func FuzzRead(f *testing.F) {
	for _, dir := range []string{"../examples/stuck-cluster", "../examples/healthy-cluster"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && isDumpFile(e.Name()) {
				f.Add(e.Name(), b)
			}
		}
	}
	f.Add("x.json", []byte(`[{"metadata":{}},{"spec":{"destination":1,"source":2},"metadata":{}}]`))
	f.Add("x.yaml", []byte("kind: List\nitems: [1, null, {kind: X}]\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		s := &Snapshot{}
		s.Add(name, data)
		for _, o := range s.Objects {
			if o.GetKind() == "" {
				t.Fatalf("object without kind: %v", o.Object)
			}
		}
		_ = Scan(s.Observe(), time.Unix(1_800_000_000, 0), DefaultThresholds())
	})
}

// TestParseErrorNamesTheLineOnce: a YAML error's own "line N" (counted within the document) is not printed after
// the file's line (issue 14 item 12: "bad.yaml:9: line 3: did not find expected ',' or '}'").
func TestParseErrorNamesTheLineOnce(t *testing.T) {
	tests := []struct {
		name, content string
		wantLine      int // 0: somewhere in the second document (lines 5 to 9), as yaml places it
	}{
		{name: "a flow mapping left open in the second document",
			content: "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels: {a: [b}\n"},
		{name: "a bad indentation in the first document", wantLine: 3,
			content: "apiVersion: v1\nkind: Pod\n metadata: x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Snapshot{}
			s.Add("bad.yaml", []byte(tt.content))
			require.Len(t, s.Problems, 1)
			p := s.Problems[0]
			if tt.wantLine > 0 {
				require.Equal(t, tt.wantLine, p.Line)
			} else {
				require.True(t, p.Line >= 5 && p.Line <= 9, "line %d is not in the second document", p.Line)
			}
			require.NotRegexp(t, `line \d+`, p.Err, "the message repeats a line number")
			require.Regexp(t, `^bad\.yaml:\d+: [^\d]`, p.String())
		})
	}
}
