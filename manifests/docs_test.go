package manifests

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/docgen"
)

// updateDocs rewrites the generated sections of docs/ instead of checking them (`make docs`).
var updateDocs = flag.Bool("update", false, "rewrite the generated sections of docs/ (make docs)")

// TestGeneratedDocs keeps the generated references of the install pages true: the chart's values table
// (docs/install-helm.md) is values.schema.json's descriptions with values.yaml's defaults, and the RBAC tables and
// the Argo CD policy (docs/install-kustomize.md) are the base's ClusterRole and Role, the permissions the install
// tests do not exercise (internal/install/rbac-not-exercised.yaml) and the argocd-account component's policy. A page that differs fails `make test`; `make docs` (-update) rewrites it.
func TestGeneratedDocs(t *testing.T) {
	docs := filepath.Join("..", "docs")
	for _, tc := range []struct{ file, section, body string }{
		{"install-helm.md", "chart-values", chartValuesTable(t)},
		{"install-kustomize.md", "rbac", rbacTables(t)},
		{"install-kustomize.md", "rbac-not-exercised", rbacNotExercisedTable(t)},
		{"install-kustomize.md", "argocd-policy", "```csv\n" + componentConfigMap(t, "argocd-rbac-cm.yaml")["policy.syncmedic.csv"] + "```"},
	} {
		t.Run(tc.file+" "+tc.section, func(t *testing.T) {
			require.NoError(t, docgen.Sync(filepath.Join(docs, tc.file), tc.section, tc.body, *updateDocs))
		})
	}
}

// schemaNode is the part of a JSON schema the values table reads.
type schemaNode struct {
	Type        any                    `json:"type"`
	Enum        []any                  `json:"enum"`
	Description string                 `json:"description"`
	Properties  map[string]*schemaNode `json:"properties"`
}

// chartValuesTable renders one row per value of values.schema.json that has no properties of its own (a free-form
// map is one value): its type, values.yaml's default and the schema's description. A value without a description
// fails the test, naming it.
func chartValuesTable(t *testing.T) string {
	t.Helper()
	var schema schemaNode
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.schema.json"))), &schema))
	var defaults map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &defaults))
	var rows [][]string
	var missing []string
	var walk func(prefix string, n *schemaNode, def any)
	walk = func(prefix string, n *schemaNode, def any) {
		names := make([]string, 0, len(n.Properties))
		for name := range n.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p, path := n.Properties[name], prefix+name
			var d any
			if m, ok := def.(map[string]any); ok {
				d = m[name]
			}
			if len(p.Properties) > 0 {
				walk(path+".", p, d)
				continue
			}
			if p.Description == "" {
				missing = append(missing, path)
			}
			rows = append(rows, []string{docgen.Code(path), schemaType(p), defaultValue(t, d), p.Description})
		}
	}
	walk("", &schema, defaults)
	require.Empty(t, missing, "values.schema.json: give these values a description (the values table of docs/install-helm.md shows it)")
	return docgen.Table([]string{"value", "type", "default", "meaning"}, rows)
}

// schemaType is a value's type as the schema says it: its type(s), or its enum.
func schemaType(n *schemaNode) string {
	if len(n.Enum) > 0 {
		var vs []string
		for _, v := range n.Enum {
			vs = append(vs, fmt.Sprintf("`%v`", v))
		}
		return "one of " + strings.Join(vs, ", ")
	}
	switch ty := n.Type.(type) {
	case string:
		return ty
	case []any:
		var vs []string
		for _, v := range ty {
			vs = append(vs, fmt.Sprint(v))
		}
		return strings.Join(vs, " or ")
	}
	return ""
}

// defaultValue is values.yaml's default as compact JSON, or nothing when it is empty.
func defaultValue(t *testing.T, d any) string {
	t.Helper()
	switch v := d.(type) {
	case nil:
		return ""
	case string:
		if v == "" {
			return ""
		}
		return docgen.Code(v)
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return docgen.Code(string(b))
}

// ruleComment matches a comment line of a role's rules list, and ruleStart the first line of a rule.
var (
	ruleComment = regexp.MustCompile(`^\s+# ?(.*)$`)
	ruleStart   = regexp.MustCompile(`^\s+- apiGroups:`)
)

// roleRows renders the rules of the Role or ClusterRole in the first document of file, each with the comment above
// it (a rule without one shares the comment of the rule before it).
func roleRows(t *testing.T, file string) [][]string {
	t.Helper()
	text := readFile(t, filepath.Join("base", file))
	doc, _, _ := strings.Cut(text, "\n---\n")
	var role rbacv1.ClusterRole // a Role's rules read the same
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &role))
	_, list, ok := strings.Cut(doc, "\nrules:\n")
	require.True(t, ok, "%s has no rules", file)
	var why []string
	var pending, last []string
	for _, line := range strings.Split(list, "\n") {
		switch {
		case ruleComment.MatchString(line):
			pending = append(pending, ruleComment.FindStringSubmatch(line)[1])
		case ruleStart.MatchString(line):
			if pending != nil {
				last, pending = pending, nil
			}
			why = append(why, strings.Join(last, " "))
		}
	}
	require.Len(t, why, len(role.Rules), "%s: a rule per '- apiGroups:' line", file)
	codes := func(ss []string) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = docgen.Code(s)
		}
		return strings.Join(out, ", ")
	}
	var rows [][]string
	for i, r := range role.Rules {
		groups := make([]string, len(r.APIGroups))
		for j, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			groups[j] = g
		}
		rows = append(rows, []string{strings.Join(groups, ", "), codes(r.Resources), codes(r.ResourceNames), strings.Join(r.Verbs, ", "), why[i]})
	}
	return rows
}

// rbacTables renders the base's ClusterRole and Role: every rule, with its verbs and why it is granted.
func rbacTables(t *testing.T) string {
	t.Helper()
	header := []string{"API group", "resources", "only these names", "verbs", "why"}
	return "Cluster-wide (ClusterRole `syncmedic`, `manifests/base/clusterrole.yaml`):\n\n" +
		docgen.Table(header, roleRows(t, "clusterrole.yaml")) +
		"\nIn the `syncmedic` namespace only (Role `syncmedic`, `manifests/base/role.yaml`):\n\n" +
		docgen.Table(header, roleRows(t, "role.yaml"))
}

// rbacNotExercisedTable renders internal/install/rbac-not-exercised.yaml, the permissions the install tests' audit
// log check does not see used: each with the scenario that needs it and why the install tests do not run it.
func rbacNotExercisedTable(t *testing.T) string {
	t.Helper()
	var list []struct{ Verb, Group, Resource, Name, Scenario, Why string }
	require.NoError(t, yaml.UnmarshalStrict([]byte(readFile(t, filepath.Join("..", "internal", "install", "rbac-not-exercised.yaml"))), &list))
	var rows [][]string
	for _, e := range list {
		group := e.Group
		if group == "" {
			group = "core"
		}
		rows = append(rows, []string{e.Verb, group, docgen.Code(e.Resource), docgen.Code(e.Name), e.Scenario, e.Why})
	}
	return docgen.Table([]string{"verb", "API group", "resource", "only this name", "needed by", "why the install tests do not use it"}, rows)
}
