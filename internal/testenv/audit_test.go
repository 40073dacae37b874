package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// auditSample is testdata/audit.jsonl: lines of a real kube-apiserver v1.31.0 audit log (the real node's, during the
// Helm install test): syncmedic's ServiceAccount's discovery GET, a watch, a list by name (field selector), an
// Event created, its Lease renewed, then refused (403: the uninstall took its Role away), between the kubelet's and
// another ServiceAccount's requests.
func auditSample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "audit.jsonl"))
	require.NoError(t, err)
	return b
}

func TestParseAuditReadsTheCallsOfOneUser(t *testing.T) {
	syncmedic := "system:serviceaccount:syncmedic:syncmedic"
	calls, err := ParseAudit(strings.NewReader(string(auditSample(t))), syncmedic)
	require.NoError(t, err)
	lease := AuditCall{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "syncmedic", Name: "syncmedic", Code: 200}
	refused := lease
	refused.Code = 403
	require.Equal(t, []AuditCall{
		{Verb: "get", NonResourceURL: "/api", Code: 200},
		{Verb: "watch", Group: "batch", Resource: "jobs", Code: 200},
		{Verb: "list", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "helmreleases.helm.toolkit.fluxcd.io", Code: 200},
		{Verb: "create", Resource: "events", Namespace: "argocd", Name: "testhelminstallontherealnode-e42a0f.f4cb7aebed51fd64", Code: 201},
		lease,
		refused,
	}, calls)
	require.Equal(t, "update coordination.k8s.io/leases \"syncmedic\" in syncmedic (403)", refused.String())

	calls, err = ParseAudit(strings.NewReader(string(auditSample(t))), "system:node:syncmedic-node")
	require.NoError(t, err)
	require.Equal(t, []AuditCall{{Verb: "list", Resource: "nodes", Name: "syncmedic-node", Code: 200}}, calls)

	t.Run("a line still being written is left for the next read", func(t *testing.T) {
		sample := auditSample(t)
		cut := strings.LastIndex(strings.TrimRight(string(sample), "\n"), "\n") + 20
		calls, err := ParseAudit(strings.NewReader(string(sample[:cut])), syncmedic)
		require.NoError(t, err)
		require.Equal(t, lease, calls[len(calls)-1], "the refused update is the last line, cut")
	})
	t.Run("a line that is not an audit Event is an error naming it", func(t *testing.T) {
		_, err := ParseAudit(strings.NewReader(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","verb":"get"}`+"\nnot json\n"), "u")
		require.ErrorContains(t, err, "audit log line 2 is not a JSON audit Event")
		_, err = ParseAudit(strings.NewReader(`{"kind":"Event","apiVersion":"v1","type":"Normal"}`+"\n"), "u")
		require.ErrorContains(t, err, `audit log line 1 is a "v1" "Event", not an audit.k8s.io Event: is this an apiserver's --audit-log-path with --audit-log-format=json?`)
	})
}

func FuzzParseAudit(f *testing.F) {
	for _, line := range strings.SplitAfter(string(auditSample(f)), "\n") {
		f.Add(line, "system:serviceaccount:syncmedic:syncmedic")
	}
	f.Fuzz(func(t *testing.T, log, user string) {
		calls, err := ParseAudit(strings.NewReader(log), user)
		if err != nil {
			require.Nil(t, calls)
			return
		}
		require.LessOrEqual(t, len(calls), strings.Count(log, "\n"), "at most one call a whole line")
	})
}

// TestTheAuditLogRecordsWhatRBACAllowedAndRefused starts an apiserver with the audit log (KubePrivateAudited) and
// has a user granted one ConfigMap by name read it and list ConfigMaps: the log has exactly both calls, the list
// refused (403); CompareRBAC over the user's Role finds the list ungranted and the grant used.
func TestTheAuditLogRecordsWhatRBACAllowedAndRefused(t *testing.T) {
	env := KubePrivateAudited(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"settings"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "probe", Namespace: ns}}}
	require.NoError(t, env.Client.Create(ctx, role))
	require.NoError(t, env.Client.Create(ctx, binding))
	user := "system:serviceaccount:" + ns + ":probe"
	cfg, err := clientcmd.BuildConfigFromFlags("", env.UserKubeconfig(t, user, "system:serviceaccounts", "system:serviceaccounts:"+ns))
	require.NoError(t, err)
	probe, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	from := env.AuditOffset(t)
	_, err = probe.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "allowed, and absent: %v", err)
	_, err = probe.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	calls := env.AuditCalls(t, from, 0, user)
	get := AuditCall{Verb: "get", Resource: "configmaps", Namespace: ns, Name: "settings", Code: 404}
	list := AuditCall{Verb: "list", Resource: "configmaps", Namespace: ns, Code: 403}
	require.Equal(t, []AuditCall{get, list}, calls)

	var objs []*unstructured.Unstructured
	for _, o := range []any{role, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: m}
		u.SetKind(map[bool]string{true: "Role", false: "RoleBinding"}[o == any(role)])
		objs = append(objs, u)
	}
	grants, err := ServiceAccountGrants(objs, ns, "probe")
	require.NoError(t, err)
	require.Equal(t, []Grant{{Namespace: ns, Verb: "get", Resource: "configmaps", Name: "settings",
		Source: "Role reader by RoleBinding " + ns + "/reader"}}, grants)
	require.Equal(t, RBACUse{Ungranted: []AuditCall{list}}, CompareRBAC(calls, grants))
}
