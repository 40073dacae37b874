package install

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// recordedCalls are syncmedic's calls in testdata/kustomize-audit.jsonl: the lines of the real node's audit log
// (one per distinct call) that TestKustomizeInstallOnTheRealNode's install made, for checks that need no node.
func recordedCalls(t *testing.T) []testenv.AuditCall {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kustomize-audit.jsonl"))
	require.NoError(t, err)
	calls, err := testenv.ParseAudit(bytes.NewReader(b), syncmedicUser)
	require.NoError(t, err)
	require.NotEmpty(t, calls)
	return calls
}

// withRoleRule returns a copy of objs whose Role syncmedic has change applied to the rule naming resourceName.
func withRoleRule(t *testing.T, objs []*unstructured.Unstructured, resourceName string, change func(rule map[string]any)) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	changed := 0
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() == "Role" && o.GetName() == "syncmedic" {
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
				if slices.Contains(names, resourceName) {
					change(rule)
					changed++
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, rules, "rules"))
		}
		out = append(out, o)
	}
	require.Equal(t, 1, changed, "one rule of the Role names %s", resourceName)
	return out
}

// TestTheRBACCheckFailsWhenARoleGainsOrLosesAVerb runs grantsUsed's comparison over the calls the kustomize install
// made on the real node (recordedCalls) and manifests/base: it passes as the install test does; with a verb taken
// from the base's Role, the call that used it is reported, and nothing else; with a verb added, the unused grant is
// reported, and nothing else.
func TestTheRBACCheckFailsWhenARoleGainsOrLosesAVerb(t *testing.T) {
	calls, base := recordedCalls(t), kustomizeRBAC(t)
	compare := func(objs []*unstructured.Unstructured) ([]testenv.AuditCall, []testenv.Grant, []string) {
		grants, err := testenv.ServiceAccountGrants(objs, "syncmedic", "syncmedic")
		require.NoError(t, err)
		return compareWithNotExercised(calls, grants, rbacNotExercised(t))
	}
	ungranted, unused, listedButUsed := compare(base)
	require.Empty(t, ungranted)
	require.Empty(t, unused)
	require.Empty(t, listedButUsed)

	t.Run("update taken from the Lease rule", func(t *testing.T) {
		ungranted, unused, listedButUsed := compare(withRoleRule(t, base, "syncmedic", func(rule map[string]any) {
			rule["verbs"] = []any{"get"}
		}))
		require.Equal(t, []testenv.AuditCall{{Verb: "update", Group: "coordination.k8s.io", Resource: "leases",
			Namespace: "syncmedic", Name: "syncmedic", Code: 200}}, ungranted)
		require.Empty(t, unused)
		require.Empty(t, listedButUsed)
	})
	t.Run("update added to the policy's rule", func(t *testing.T) {
		ungranted, unused, listedButUsed := compare(withRoleRule(t, base, "syncmedic-policy", func(rule map[string]any) {
			rule["verbs"] = []any{"get", "update"}
		}))
		require.Empty(t, ungranted)
		require.Equal(t, []testenv.Grant{{Namespace: "syncmedic", Verb: "update", Resource: "configmaps", Name: "syncmedic-policy",
			Source: "Role syncmedic by RoleBinding syncmedic/syncmedic"}}, unused)
		require.Empty(t, listedButUsed)
	})
}

// TestEveryGrantNotExercisedIsGrantedAndExplained checks rbac-not-exercised.yaml against the installs: each entry is
// granted by the base, a component or the chart (no stale entry), and every grant of a component or a chart value
// that the install tests do not install (what it adds to the base and the chart's defaults, which they install) is
// listed, with the scenario that needs it.
func TestEveryGrantNotExercisedIsGrantedAndExplained(t *testing.T) {
	keys := func(objs []*unstructured.Unstructured) map[string]bool {
		grants, err := testenv.ServiceAccountGrants(objs, "syncmedic", "syncmedic")
		require.NoError(t, err)
		out := map[string]bool{}
		for _, g := range grants {
			out[grantKey(g)] = true
		}
		return out
	}
	installed := keys(kustomizeRBAC(t))
	for k := range keys(helmTemplate(t)) {
		installed[k] = true
	}
	list := rbacNotExercised(t)
	all := map[string]bool{}
	for k := range installed {
		all[k] = true
	}
	root := repoRoot(t)
	for _, variant := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{
		{"manifests/components/workflows-remedy", kustomizeWith(t, filepath.Join(root, "manifests", "components", "workflows-remedy"))},
		{"manifests/components/without-flux", kustomizeWith(t, filepath.Join(root, "manifests", "components", "without-flux"))},
		{"chart workflowsRemedy.enabled=true", helmTemplate(t, "workflowsRemedy.enabled=true")},
		{"chart flux.enabled=false", helmTemplate(t, "flux.enabled=false")},
	} {
		for k := range keys(variant.objs) {
			all[k] = true
			if !installed[k] {
				_, listed := notExercised(list, k)
				require.True(t, listed, "%s grants %s, which no install test installs: list it in internal/install/rbac-not-exercised.yaml with the scenario that needs it", variant.name, k)
			}
		}
	}
	for _, e := range list {
		require.True(t, all[e.key()], "internal/install/rbac-not-exercised.yaml lists %s, which no install grants: remove it", e.key())
		require.NotEmpty(t, e.Scenario, e.key())
		require.NotEmpty(t, e.Why, e.key())
	}
}

// kustomizeWith builds manifests/base with the component dir, as a user's kustomization includes it.
func kustomizeWith(t *testing.T, component string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: ["+
		rel(filepath.Join(repoRoot(t), "manifests", "base"))+"]\ncomponents: ["+rel(component)+"]\n"), 0o600))
	objs, err := testenv.KustomizeBuild(dir)
	require.NoError(t, err)
	return objs
}

// helmTemplate renders the chart as the release syncmedic in namespace syncmedic, with set as --set values.
func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "syncmedic", filepath.Join(repoRoot(t), "charts", "syncmedic"), "--namespace", "syncmedic"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := testenv.HelmCommand(t, args...).Output()
	require.NoError(t, err)
	return decodeManifests(t, string(out))
}
