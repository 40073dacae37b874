package snapshot

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/argocd/rules"
)

// slowYAML is the reference decode of one document: yaml.YAMLToJSON, a json.Number decode and normalizeNumbers.
func slowYAML(doc []byte) (interface{}, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var v interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalizeNumbers(v), nil
}

func TestDecodeYAMLFast(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		fast bool // decodeYAMLFast takes it on (else it must say no)
		bad  bool // YAML itself refuses it
	}{
		{name: "block mappings and sequences as kubectl prints them", fast: true,
			doc: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  annotations:\n    argocd.argoproj.io/hook: PreSync\n  finalizers:\n  - argocd.argoproj.io/hook-finalizer\n  generation: 3\n  name: migrate\nspec:\n  template:\n    spec:\n      containers:\n      - args:\n        - -c\n        - echo\n        image: busybox:1.36\n        name: m\n      restartPolicy: Never\nstatus:\n  active: 0\n  ready: -1\n  succeeded: 1\n"},
		{name: "flow collections, quoted scalars, booleans and nulls", fast: true,
			doc: "metadata: {name: a, labels: {x: \"True\", z: 'it''s'}, k: ~}\nspec: [1, true, false, null, \"2025-01-01T00:00:00Z\", '']\nempty: {}\nnone: []\nnothing:\nq: 'a: b'\n"},
		{name: "scalars YAML resolves itself: floats, timestamps, octal, hex, big ints", fast: true,
			doc: "a: 1.5\nb: 2.0\nc: 2025-01-01T00:00:00Z\nd: 0777\ne: 0x1F\nf: 99999999999999999999\ng: -0\ni: +5\nj: 1e3\n"},
		{name: "YAML 1.1 booleans stay booleans", fast: true,
			doc: "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: Null\n"},
		{name: "escapes in double quotes", fast: true, doc: "a: \"tab\\there\"\nb: \"\\u00e9\"\n"},
		{name: "a block scalar", doc: "data:\n  script: |\n    echo a\n    echo b\n"},
		{name: "a folded scalar", doc: "a: >\n  x\n  y\n"},
		{name: "a multi-line plain scalar", doc: "a: one\n  two\n"},
		{name: "anchors and aliases", doc: "a: &x {b: 1}\nc: *x\n"},
		{name: "a merge key", doc: "a: {b: 1}\n<<: {c: 2}\n"},
		{name: "a tag", doc: "a: !!str 5\n"},
		{name: "infinity, which JSON cannot hold", doc: "a: .inf\n"},
		{name: "a quote in single quotes", fast: true, doc: "a: 'it''s'\nb: ['x''', '''y']\n"},
		{name: "duplicate keys", doc: "a: 1\na: 2\n"},
		{name: "a boolean key", doc: "on: 1\n"},
		{name: "a number key", doc: "8080: http\n"},
		{name: "a comment after a value", doc: "a: b # note\n"},
		{name: "a root that is a sequence", doc: "- a\n- b\n"},
		{name: "tabs", doc: "a:\n\tb: 1\n"},
		{name: "a nested sequence", doc: "a:\n- - 1\n"},
		{name: "an unclosed flow mapping", doc: "a: {b: 1\n"},
		{name: "a URL in a flow mapping", doc: "a: {u: http://x}\n"},
		{name: "a trailing comma", doc: "a: [1, 2, ]\n"},
		{name: "a key 1,024 characters long", fast: true, doc: strings.Repeat("k", 1024) + ": v\n"},
		{name: "a quoted key 1,024 characters long with its quotes", fast: true, doc: "'" + strings.Repeat("k", 1022) + "': v\n"},
		{name: "a key in a sequence 1,024 characters long", fast: true, doc: "a:\n- " + strings.Repeat("k", 1024) + ": v\n"},
		{name: "a key in a flow mapping 1,024 characters long", fast: true, doc: "a: {" + strings.Repeat("k", 1024) + ": v}\n"},
		{bad: true, name: "a key longer than YAML's 1,024 characters", doc: strings.Repeat("T", 1025) + ": v\n"},
		{bad: true, name: "a quoted key longer than YAML's 1,024 characters", doc: "\"" + strings.Repeat("k", 1023) + "\": v\n"},
		{bad: true, name: "a key in a sequence longer than YAML's 1,024 characters", doc: "a:\n- " + strings.Repeat("k", 1025) + ": v\n"},
		{bad: true, name: "a key in a flow mapping longer than YAML's 1,024 characters", doc: "a: {" + strings.Repeat("k", 1025) + ": v}\n"},
		{name: "a flow key whose colon is 1,025 characters away", doc: "a: {" + strings.Repeat("k", 1000) + strings.Repeat(" ", 25) + ": v}\n"},
		{bad: true, name: "a next line character (NEL) in a plain scalar", doc: "a: b\u0085c\n"},
		{bad: true, name: "a line separator in a plain scalar", doc: "a: b\u2028c\n"},
		{name: "a paragraph separator ending a plain scalar", doc: "a: b\u2029\n"},
		{bad: true, name: "a line separator in a key", doc: "a\u2028b: c\n"},
		{name: "a next line character in double quotes, which YAML folds", doc: "a: \"b\u0085c\"\n"},
		{name: "a no-break space and an ideographic space, which are not breaks", fast: true, doc: "a: b\u00a0\nc: d\u3000e\n"},
		{name: "flow sequences nested 999 deep under the root", fast: true, doc: "a: " + strings.Repeat("[", 999) + strings.Repeat("]", 999) + "\n"},
		{name: "flow sequences nested 1,000 deep under the root", doc: "a: " + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + "\n"},
		{bad: true, name: "flow sequences nested deeper than YAML's 10,000 levels", doc: "a: " + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "\n"},
		{bad: true, name: "flow sequences nested deeper than encoding/json's 10,000 levels", doc: "a: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n"},
		{name: "block mappings nested 1,001 deep", doc: blockNest(1001)},
		{name: "block mappings nested 1,000 deep", fast: true, doc: blockNest(1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := decodeYAMLFast([]byte(tt.doc))
			require.Equal(t, tt.fast, ok)
			want, err := slowYAML([]byte(tt.doc))
			if ok {
				require.NoError(t, err)
				require.Equal(t, want, interface{}(got))
			} else if tt.bad {
				require.Error(t, err, "YAML itself refuses it, so the fast path must leave it")
			}
		})
	}
}

// blockNest is n block mappings, each the only value of the one around it.
func blockNest(n int) string {
	var b strings.Builder
	for i := 0; i < n-1; i++ {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	b.WriteString(strings.Repeat(" ", n-1) + "k: v\n")
	return b.String()
}

// FuzzDecodeYAMLFast: whatever decodeYAMLFast takes on, it decodes exactly as the reference does.
func FuzzDecodeYAMLFast(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: {x: y}\nspec:\n  containers:\n  - name: c\n    ports: [80, 443]\n"))
	f.Add([]byte("a: [1, {b: 'c', d: \"e\"}, null]\nf: 1.0\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, ok := decodeYAMLFast(doc)
		if !ok {
			return
		}
		want, err := slowYAML(doc)
		if err != nil {
			t.Fatalf("fast decoded %q that YAML rejects: %v", doc, err)
		}
		require.Equal(t, want, interface{}(got), "doc %q", doc)
	})
}

// requireSameRead checks that the stream reads data as addAll does when addAll finds no problem.
func requireSameRead(t testing.TB, name string, data []byte) {
	all := &Snapshot{KeepUsedOnly: true}
	all.init()
	all.addAll(name, data)
	if len(all.Problems) > 0 {
		return
	}
	st := &Snapshot{KeepUsedOnly: true}
	st.Add(name, data)
	require.Equal(t, all.Objects, st.Objects)
	require.Equal(t, all.Problems, st.Problems)
	require.Equal(t, all.kinds, st.kinds)
	require.Equal(t, all.counts, st.counts)
	require.Equal(t, all.total, st.total)
}

func TestStreamReadsAsAddAll(t *testing.T) {
	for _, dir := range []string{"../examples/stuck-cluster", "../examples/healthy-cluster"} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if !isDumpFile(e.Name()) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			t.Run(e.Name(), func(t *testing.T) { requireSameRead(t, e.Name(), data) })
		}
	}
	cases := map[string]string{
		"list.yaml":       "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata:\n    name: a\n    deletionTimestamp: \"2025-01-01T00:00:00Z\"\n    finalizers: [kubernetes.io/pvc-protection]\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n  data:\n    x: |\n      multi\n      line\n- apiVersion: v1\n  kind: Service\n  metadata: {name: s, managedFields: [{manager: kubectl}], annotations: {kubectl.kubernetes.io/last-applied-configuration: \"{}\"}}\nkind: List\nmetadata:\n  resourceVersion: \"\"\n",
		"indented.yaml":   "kind: List\nitems:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n  - apiVersion: batch/v1\n    kind: Job\n    metadata: {name: j, annotations: {helm.sh/hook: pre-install}}\n",
		"notalist.yaml":   "apiVersion: v1\nkind: Thing\nitems:\n- a\nmetadata: {name: x}\n",
		"list.json":       `{"apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}},{"apiVersion":"v1","kind":"Pod","metadata":{"name":"q","deletionTimestamp":"2025-01-01T00:00:00Z"}},{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}],"kind":"List","metadata":{}}`,
		"apps.json":       `[{"metadata":{"name":"a","namespace":"argocd"},"spec":{"source":{"repoURL":"r"},"destination":{"namespace":"x"}}},null,[{"apiVersion":"v1","kind":"Pod","metadata":{}}]]`,
		"object.json":     `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`,
		"escaped.json":    `[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","deletion\u0054imestamp":"2025-01-01T00:00:00Z"}}]`,
		"alias.yaml":      "kind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: &m {name: a, deletionTimestamp: \"2025-01-01T00:00:00Z\"}\n- apiVersion: v1\n  kind: Pod\n  metadata: *m\n",
		"crd.yaml":        "kind: List\nitems:\n- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: helmreleases.helm.toolkit.fluxcd.io}\n- apiVersion: apiextensions.k8s.io/v1\n  kind: CustomResourceDefinition\n  metadata: {name: other.example.com}\n",
		"multidoc.yaml":   "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n# c\n---\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: b\n",
		"badutf8.json":    "[{\"apiVersion\":\"v1\",\"kind\":\"\x9d\",\"metadata\":{}},{\"apiVersion\":\"v1\",\"kind\":\"P\xc3\xb6d\",\"metadata\":{}}]",
		"quotedkind.yaml": "kind: List\nitems:\n- apiVersion: \"v1\"\n  kind: 'Pod'\n  metadata:\n    name: b\n- apiVersion: v1\n  kind: Yes\n  metadata:\n    name: c\n",
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) { requireSameRead(t, name, []byte(data)) })
	}
}

// FuzzStream: on any input addAll reads without a problem, the stream reads the same objects and counts.
func FuzzStream(f *testing.F) {
	f.Add("l.yaml", []byte("kind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s\n"))
	f.Add("l.json", []byte(`{"items":[{"apiVersion":"v1","kind":"Pod","metadata":{}}],"kind":"PodList"}`))
	f.Add("b.json", []byte("[{\"apiVersion\":\"v1\",\"kind\":\"\x9d\",\"metadata\":{}}]")) // found by CI at stop 34
	f.Fuzz(func(t *testing.T, name string, data []byte) { requireSameRead(t, name, data) })
}

// TestIsHookIsArgoCDs: keep's isHook answers as argocd.IsHook, which Observe uses to find hooks.
func TestIsHookIsArgoCDs(t *testing.T) {
	for _, md := range []string{
		`{}`, `{"annotations":{}}`, `{"annotations":{"argocd.argoproj.io/hook":"PreSync"}}`,
		`{"annotations":{"helm.sh/hook":"pre-install"}}`, `{"annotations":{"argocd.argoproj.io/hook":"PreSync","n":5}}`,
		`{"annotations":{"argocd.argoproj.io/hook-finalizer":"x"}}`, `{"annotations":"x"}`,
	} {
		var m map[string]interface{}
		require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":`+md+`}`), &m))
		u := &unstructured.Unstructured{Object: m}
		require.Equal(t, rules.IsHook(u), isHook(u), md)
	}
}

// FuzzAppendJSON: appendJSON writes what json.Marshal writes for any object JSON decodes to (as the reader
// normalizes it).
func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,-3e-9,1e21,true,null,"x<y","\u00e9\u0001"],"B":{"c":{}},"d":[],"e":123456789012}`))
	for _, dir := range []string{"../examples/stuck-cluster", "../examples/healthy-cluster"} {
		s, err := ReadPaths(dir)
		require.NoError(f, err)
		for _, o := range s.Objects {
			b, err := json.Marshal(o.Object)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v interface{}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		v = normalizeNumbers(v)
		want, err := json.Marshal(v)
		got, err2 := appendJSON(nil, v)
		if err != nil {
			require.Error(t, err2)
			return
		}
		require.NoError(t, err2)
		require.Equal(t, string(want), string(got))
	})
}
