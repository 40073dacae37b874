package kube_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/kube"
)

// namespacedWebhook creates a ValidatingWebhookConfiguration name calling Service ns/webhook with policy, controlled
// by owner when it is not nil (as Knative ≤1.15 writes it), matching nothing (a namespace label no namespace has).
func namespacedWebhook(t *testing.T, env *testenv.Env, name, ns string, policy admissionregistrationv1.FailurePolicyType, owner *corev1.Namespace) {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validation.webhook.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook"}},
			FailurePolicy:           ptr.To(policy),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"syncmedic-test-webhook": name}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
		}}}
	if owner != nil {
		cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	require.NoError(t, env.Client.Create(context.Background(), cfg))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })
}

// TestWebhookRulesReadTheNamespaceOnTheAPIServer: the live scanner watches Namespaces, so the webhook rules say when
// a backend's or owner's Namespace is Terminating or gone. The real namespace controller (kube-controller-manager
// v1.31.0) deletes a deleted namespace's Services and then the Namespace; one namespace stays Terminating because a
// ConfigMap in it keeps a finalizer (the common way a namespace hangs). A webhook owned by an Active namespace is the
// near miss: reported as before, its Namespace named as existing.
func TestWebhookRulesReadTheNamespaceOnTheAPIServer(t *testing.T) {
	env := testenv.KubeWithControllers(t)
	ctx := context.Background()
	base := env.Namespace(t)
	namespace := func(suffix string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: base + "-" + suffix}}
		require.NoError(t, env.Client.Create(ctx, ns))
		require.NoError(t, env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns.Name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}))
		return ns
	}
	terminating, gone, active := namespace("term"), namespace("gone"), namespace("live")
	hold := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hold", Namespace: terminating.Name, Finalizers: []string{"example.com/hold"}}}
	require.NoError(t, env.Client.Create(ctx, hold))
	t.Cleanup(func() { // let the namespace controller finish, and the garbage collector delete the owned configuration
		_ = env.Client.Patch(context.Background(), hold, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	namespacedWebhook(t, env, base+"-term-owned", terminating.Name, admissionregistrationv1.Fail, terminating)
	namespacedWebhook(t, env, base+"-gone-backend", gone.Name, admissionregistrationv1.Fail, nil)
	namespacedWebhook(t, env, base+"-live-owned", active.Name, admissionregistrationv1.Ignore, active)

	require.NoError(t, env.Client.Delete(ctx, terminating))
	require.NoError(t, env.Client.Delete(ctx, gone))
	require.Eventually(t, func() bool {
		_, errGone := env.Clientset.CoreV1().Namespaces().Get(ctx, gone.Name, metav1.GetOptions{})
		_, errSvc := env.Clientset.CoreV1().Services(terminating.Name).Get(ctx, "webhook", metav1.GetOptions{})
		return apierrors.IsNotFound(errGone) && apierrors.IsNotFound(errSvc)
	}, 2*time.Minute, 100*time.Millisecond, "the namespace controller removes the deleted namespace and the Terminating one's Service")
	live, err := env.Clientset.CoreV1().Namespaces().Get(ctx, terminating.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.NamespaceTerminating, live.Status.Phase, "the ConfigMap's finalizer holds the namespace")

	th := kube.Thresholds{Terminating: 2 * time.Second, WebhookBackend: 2 * time.Second, ArtifactGC: 2 * time.Second}
	s, err := kube.NewScanner(kube.ScannerOptions{Config: env.Config, Cluster: "e2e", Thresholds: th})
	require.NoError(t, err)
	require.Contains(t, s.Watched(), "/v1, Resource=namespaces")
	sink := &latestSink{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	want := []string{
		string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-gone-backend: Webhook validation.webhook.example.com (ValidatingWebhookConfiguration " + base + "-gone-backend) rejects every write it matches: Service " + gone.Name + "/webhook does not exist; Namespace " + gone.Name + " does not exist, so the backend is gone with it; failurePolicy is Fail",
		string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-term-owned: Webhook validation.webhook.example.com (ValidatingWebhookConfiguration " + base + "-term-owned) rejects every write it matches: Service " + terminating.Name + "/webhook does not exist; Namespace " + terminating.Name + " is Terminating, so the backend is gone with it; failurePolicy is Fail",
		string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-live-owned: ValidatingWebhookConfiguration " + base + "-live-owned is controlled by Namespace " + active.Name + ": Argo CD will not prune it, so uninstalling the app leaves a webhook without a backend",
		string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-term-owned: ValidatingWebhookConfiguration " + base + "-term-owned is controlled by Namespace " + terminating.Name + ", which is Terminating: the webhook's backend is deleted with it, and the configuration stays until the Namespace is gone",
	}
	ours := func() ([]string, map[string]string) {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		var got []string
		nsEvidence := map[string]string{}
		for _, f := range sink.findings {
			if !strings.HasPrefix(f.Object.Name, base) {
				continue
			}
			key := string(f.Rule) + " " + f.Object.Name
			got = append(got, key+": "+f.Summary)
			for _, e := range f.Evidence {
				if e.Field == "namespace" {
					nsEvidence[key] = e.Value
				}
			}
		}
		sort.Strings(got)
		return got, nsEvidence
	}
	// The thresholds pass within seconds; wait for all four, then a little longer for anything else to show.
	got, nsEvidence := ours()
	for deadline := time.Now().Add(time.Minute); len(got) < len(want) && time.Now().Before(deadline); got, nsEvidence = ours() {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	got, nsEvidence = ours()
	require.Equal(t, want, got, "exactly these findings about this test's webhooks, nothing else")
	require.Equal(t, map[string]string{
		string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-gone-backend": "Namespace " + gone.Name + " does not exist",
		string(syncmedic.RuleWebhookBackendMissing) + " " + base + "-term-owned":   "Namespace " + terminating.Name + " is Terminating",
		string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-live-owned":   "Namespace " + active.Name + " exists (Active)",
		string(syncmedic.RuleWebhookNamespaceOwned) + " " + base + "-term-owned":   "Namespace " + terminating.Name + " is Terminating",
	}, nsEvidence)
	t.Run("credentials an older role made, without Namespaces, still sync: Namespaces are not watched and the findings say so", func(t *testing.T) {
		user := "no-namespaces-" + base
		rules := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflows"}, Verbs: []string{"get", "list", "watch"}},
		}
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}))
		require.NoError(t, env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
		cfg, err := clientcmd.BuildConfigFromFlags("", env.UserKubeconfig(t, user))
		require.NoError(t, err)
		var restricted *kube.Scanner
		require.Eventually(t, func() bool { // RBAC takes a moment to reach the authorizer
			restricted, err = kube.NewScanner(kube.ScannerOptions{Config: cfg, Cluster: "e2e-restricted", Thresholds: th})
			require.NoError(t, err)
			return slices.Contains(restricted.Watched(), "/v1, Resource=services")
		}, 10*time.Second, 200*time.Millisecond)
		require.NotContains(t, restricted.Watched(), "/v1, Resource=namespaces")
		rsink := &latestSink{}
		rctx, rcancel := context.WithCancel(ctx)
		rdone := make(chan error, 1)
		go func() { rdone <- restricted.Run(rctx, rsink) }()
		defer func() { rcancel(); require.NoError(t, <-rdone) }()
		require.Eventually(t, func() bool {
			f, ok := rsink.find(syncmedic.RuleWebhookNamespaceOwned, "", base+"-term-owned")
			if !ok {
				return false
			}
			for _, e := range f.Evidence {
				if e.Field == "namespace" {
					return e.Value == "Namespace "+terminating.Name+": not read (Namespaces were not listed)"
				}
			}
			return false
		}, time.Minute, 50*time.Millisecond, "the finding says Namespaces were not read")
	})
}
