package install

import (
	"bufio"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// syncmedicUser is the user syncmedic's ServiceAccount (syncmedic/syncmedic, base and chart) is to the apiserver.
const syncmedicUser = "system:serviceaccount:syncmedic:syncmedic"

// kustomizeRBAC is the RBAC of the kustomize install: manifests/base as the install page applies it.
func kustomizeRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.KustomizeBuild(filepath.Join(repoRoot(t), "manifests", "base"))
	require.NoError(t, err)
	return objs
}

// helmRBAC is the RBAC of the Helm release syncmedic in namespace syncmedic as installed: `helm get manifest`.
func helmRBAC(t *testing.T, n *testenv.Node, work string) []*unstructured.Unstructured {
	t.Helper()
	return decodeManifests(t, runShell(t, n, work, "helm get manifest syncmedic -n syncmedic"))
}

// grantsUsed checks what syncmedic's ServiceAccount did on the node between the audit log's offsets from and to (its
// calls; to is taken before the uninstall, which takes syncmedic's grants away while its Pods stop) against
// what the rendered manifests rbac grant it, both ways: every call was answered without 403 and is allowed by a grant
// (or by Kubernetes' grants to every authenticated user: discovery); and, when everyGrant, every grant was used by a
// call or is in rbac-not-exercised.yaml, and nothing in rbac-not-exercised.yaml that rbac grants was used.
func grantsUsed(t *testing.T, n *testenv.Node, from, to int64, rbac []*unstructured.Unstructured, everyGrant bool) {
	t.Helper()
	calls := n.AuditCalls(t, from, to, syncmedicUser)
	require.NotEmpty(t, calls, "the audit log has syncmedic's calls")
	t.Logf("syncmedic's calls (audit log):\n%s", testenv.Calls(calls))
	grants, err := testenv.ServiceAccountGrants(rbac, "syncmedic", "syncmedic")
	require.NoError(t, err)
	ungranted, unused, listedButUsed := compareWithNotExercised(calls, grants, rbacNotExercised(t))
	require.Empty(t, ungranted, "calls syncmedic made that its RBAC does not grant (or that were refused): grant them, or stop making them")
	if everyGrant {
		require.Empty(t, unused, "granted but never used in this test: exercise it here, or list it in internal/install/rbac-not-exercised.yaml with the scenario that needs it")
		require.Empty(t, listedButUsed, "listed in internal/install/rbac-not-exercised.yaml but used in this test: remove it from the list")
	}
}

// compareWithNotExercised compares calls with grants (testenv.CompareRBAC) and splits the unused grants: those not
// in notExercised (unused) and the entries of notExercised whose grant was used (listedButUsed).
func compareWithNotExercised(calls []testenv.AuditCall, grants []testenv.Grant, notExercisedList []notExercisedGrant) (ungranted []testenv.AuditCall, unused []testenv.Grant, listedButUsed []string) {
	use := testenv.CompareRBAC(calls, grants)
	isUnused := map[string]bool{}
	for _, g := range use.Unused {
		if _, ok := notExercised(notExercisedList, grantKey(g)); ok {
			isUnused[grantKey(g)] = true
			continue
		}
		unused = append(unused, g)
	}
	for _, g := range grants {
		if e, ok := notExercised(notExercisedList, grantKey(g)); ok && !isUnused[grantKey(g)] {
			listedButUsed = append(listedButUsed, e.key()+": "+e.Scenario)
		}
	}
	return use.Ungranted, unused, listedButUsed
}

// decodeManifests splits a YAML stream of manifests into objects, skipping empty documents.
func decodeManifests(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m), "%s", doc)
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}
