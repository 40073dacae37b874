package manifests

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestTheWorkflowsRemedyWriteIsOptIn: the base lets syncmedic read Workflows and not patch them; the component
// manifests/components/workflows-remedy (and the chart's workflowsRemedy.enabled) adds exactly `patch` on
// workflows.argoproj.io, bound to syncmedic's ServiceAccount, and the apiserver then allows it.
func TestTheWorkflowsRemedyWriteIsOptIn(t *testing.T) {
	objs := build(t, baseWith(t, "workflows-remedy"))
	var cr rbacv1.ClusterRole
	convert(t, find(t, objs, "ClusterRole", "syncmedic-workflows-remedy"), &cr)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflows"}, Verbs: []string{"patch"}}}
	require.Equal(t, want, cr.Rules)

	charted := helmTemplate(t, "syncmedic", "syncmedic", "workflowsRemedy.enabled=true")
	var ccr rbacv1.ClusterRole
	convert(t, find(t, charted, "ClusterRole", "syncmedic-workflows-remedy"), &ccr)
	require.Equal(t, want, ccr.Rules, "the chart grants the same")
	var crb rbacv1.ClusterRoleBinding
	convert(t, find(t, charted, "ClusterRoleBinding", "syncmedic-workflows-remedy"), &crb)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "syncmedic", Namespace: "syncmedic"}}, crb.Subjects)
	require.NotContains(t, identities(helmTemplate(t, "syncmedic", "syncmedic")), "ClusterRole /syncmedic-workflows-remedy", "off by default")

	env := testenv.Kube(t)
	apply(t, env.Client, objs)
	spec := serviceAccount
	spec.ResourceAttributes = &authzv1.ResourceAttributes{Verb: "patch", Group: "argoproj.io", Resource: "workflows", Namespace: "ci", Name: "build-1"}
	sar, err := env.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, sar.Status.Allowed, "with the component: %s", sar.Status.Reason)
}
