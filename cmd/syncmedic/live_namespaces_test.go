package main

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestLiveScanReadsNamespaces: `scan --kubeconfig` lists Namespaces, so the webhook rules say that a webhook's
// Namespace is Terminating (the apiserver's own state for a deleted Namespace still holding its "kubernetes"
// finalizer; no namespace controller runs on this apiserver to finish it), says what it read, and with credentials
// that may not list Namespaces names the skipped list and claims nothing about them. A webhook owned by an Active
// Namespace is the near miss.
func TestLiveScanReadsNamespaces(t *testing.T) {
	env := testenv.KubePrivate(t)
	ctx := context.Background()
	base := env.Namespace(t)
	namespace := func(suffix string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: base + "-" + suffix}}
		require.NoError(t, env.Client.Create(ctx, ns))
		require.NoError(t, env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns.Name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}))
		return ns
	}
	terminating, active := namespace("term"), namespace("live")
	webhook := func(name string, policy admissionregistrationv1.FailurePolicyType, owner *corev1.Namespace) {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "validation.webhook.example.com",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: owner.Name, Name: "webhook"}},
				FailurePolicy:           ptr.To(policy),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"syncmedic-test-webhook": name}}, // matches nothing
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			}}}
		require.NoError(t, env.Client.Create(ctx, cfg))
	}
	webhook(base+"-term", admissionregistrationv1.Fail, terminating)
	webhook(base+"-live", admissionregistrationv1.Ignore, active)
	require.NoError(t, env.Client.Delete(ctx, terminating))
	live, err := env.Clientset.CoreV1().Namespaces().Get(ctx, terminating.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.NamespaceTerminating, live.Status.Phase)

	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // past every default threshold
	// scan returns the report and this test's findings, each with its namespace evidence; ok is false when the scan
	// printed no report (credentials whose RBAC has not reached the authorizer yet).
	scan := func(t *testing.T, kubeconfig string) (r syncmedic.Report, ours []string, ok bool) {
		_, out, _ := runCLI(t, "scan", "--kubeconfig", kubeconfig, "--now", later, "-o", "json")
		if json.Unmarshal([]byte(out), &r) != nil {
			return r, nil, false
		}
		for _, f := range r.Findings {
			if strings.HasPrefix(f.Object.Name, base) {
				ns := ""
				for _, e := range f.Evidence {
					if e.Field == "namespace" {
						ns = e.Value
					}
				}
				ours = append(ours, string(f.Rule)+" "+f.Object.Name+": "+f.Summary+" ["+ns+"]")
			}
		}
		sort.Strings(ours)
		return r, ours, true
	}

	t.Run("the Terminating Namespace is named in both webhook findings, the Active one as existing", func(t *testing.T) {
		r, ours, ok := scan(t, env.Kubeconfig)
		require.True(t, ok, "a report")
		require.Equal(t, []string{
			string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-term: Webhook validation.webhook.example.com (ValidatingWebhookConfiguration " + base + "-term) rejects every write it matches: Service " + terminating.Name + "/webhook has no ready endpoints; Namespace " + terminating.Name + " is Terminating, so the backend is gone with it; failurePolicy is Fail [Namespace " + terminating.Name + " is Terminating]",
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-live: ValidatingWebhookConfiguration " + base + "-live is controlled by Namespace " + active.Name + ": Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend [Namespace " + active.Name + " exists (Active)]",
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-term: ValidatingWebhookConfiguration " + base + "-term is controlled by Namespace " + terminating.Name + ", which is Terminating: the webhook's backend is deleted with it, and the configuration stays until the Namespace is gone [Namespace " + terminating.Name + " is Terminating]",
		}, ours)
		require.Len(t, r.Read, 1)
		require.Regexp(t, `\d+ Namespace\b`, r.Read[0], "the report says it read Namespaces")
	})

	t.Run("credentials that may not list Namespaces skip them, say so, and claim nothing about them", func(t *testing.T) {
		user := "no-namespaces-" + base
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "services", "events", "secrets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflows"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kustomize.toolkit.fluxcd.io"}, Resources: []string{"kustomizations"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"source.toolkit.fluxcd.io"}, Resources: []string{"gitrepositories", "ocirepositories", "buckets"}, Verbs: []string{"get", "list", "watch"}},
		}}))
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
		kubeconfig := env.UserKubeconfig(t, user)
		var r syncmedic.Report
		var ours []string
		require.Eventually(t, func() bool { // RBAC takes a moment to reach the authorizer
			var ok bool
			r, ours, ok = scan(t, kubeconfig)
			return ok && len(ours) == 3
		}, 10*time.Second, 200*time.Millisecond)
		var skipped []string
		for _, p := range r.Problems {
			if strings.HasPrefix(p, "namespaces") {
				skipped = append(skipped, p)
			}
		}
		require.Len(t, skipped, 1, "%v", r.Problems)
		require.Contains(t, skipped[0], "namespaces: not readable with these credentials, skipped")
		notRead := func(ns string) string { return "[Namespace " + ns + ": not read (Namespaces were not listed)]" }
		require.Equal(t, []string{
			string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-term: Webhook validation.webhook.example.com (ValidatingWebhookConfiguration " + base + "-term) rejects every write it matches: Service " + terminating.Name + "/webhook has no ready endpoints and failurePolicy is Fail " + notRead(terminating.Name),
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-live: ValidatingWebhookConfiguration " + base + "-live is controlled by Namespace " + active.Name + ": Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend " + notRead(active.Name),
			string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-term: ValidatingWebhookConfiguration " + base + "-term is controlled by Namespace " + terminating.Name + ": Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend " + notRead(terminating.Name),
		}, ours)
	})
}
