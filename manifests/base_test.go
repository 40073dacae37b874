package manifests

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/policy"
)

// serviceAccount is the user the apiserver sees for syncmedic's Pods.
var serviceAccount = authzv1.SubjectAccessReviewSpec{
	User:   "system:serviceaccount:syncmedic:syncmedic",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:syncmedic", "system:authenticated"},
}

func TestBaseDeploymentRunsServeLockedDown(t *testing.T) {
	objs := build(t, "base")
	var d appsv1.Deployment
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", "syncmedic").Object, &d))
	require.Equal(t, "syncmedic", d.Namespace)
	pod := d.Spec.Template.Spec
	require.Equal(t, "syncmedic", pod.ServiceAccountName)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	c := pod.Containers[0]
	require.Equal(t, "ghcr.io/syncmedic/syncmedic:v0.1.0", c.Image)
	require.Equal(t, "serve", c.Args[0])
	require.Contains(t, c.Args, "--policy-configmap=syncmedic/syncmedic-policy")
	require.Contains(t, c.Args, "--metrics-addr=:9293")
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, "metrics", c.LivenessProbe.HTTPGet.Port.StrVal, "the probes reach the metrics port, where /healthz and /readyz are")
	require.Equal(t, "metrics", c.ReadinessProbe.HTTPGet.Port.StrVal)
	require.Equal(t, []corev1.ContainerPort{{Name: "http", ContainerPort: 9292}, {Name: "metrics", ContainerPort: 9293}}, c.Ports)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.False(t, c.Resources.Requests.Memory().IsZero())
	require.False(t, c.Resources.Limits.Memory().IsZero())

	t.Run("the policy ConfigMap holds the documented default", func(t *testing.T) {
		var cm corev1.ConfigMap
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "ConfigMap", "syncmedic-policy").Object, &cm))
		p, err := policy.LoadPolicy([]byte(cm.Data[policy.PolicyConfigMapKey]))
		require.NoError(t, err)
		def := policy.DefaultPolicy()
		require.Equal(t, def.Defaults, p.Defaults)
		require.Equal(t, def.ResolveAfter, p.ResolveAfter)
		require.Equal(t, def.KillSwitch, p.KillSwitch)
		require.Empty(t, p.Rules)
	})
}

func TestBaseAppliesAndGrantsExactlyWhatSyncmedicNeeds(t *testing.T) {
	env := testenv.Kube(t)
	objs := build(t, "base")
	apply(t, env.Client, objs)

	t.Run("its Pod is admitted by the restricted Pod Security Standard of its namespace", func(t *testing.T) {
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Deployment", "syncmedic").Object, &d))
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "syncmedic-admission-check", Namespace: d.Namespace}, Spec: d.Spec.Template.Spec}
		require.NoError(t, env.Client.Create(context.Background(), pod, client.DryRunAll))

		pod.Spec.Containers[0].SecurityContext = nil // the control: the same Pod without its hardening is refused
		err := env.Client.Create(context.Background(), pod, client.DryRunAll)
		require.ErrorContains(t, err, `violates PodSecurity "restricted`)
	})

	type check struct {
		verb, group, resource, namespace, name string
	}
	can := []check{
		{"watch", "helm.toolkit.fluxcd.io", "helmreleases", "", ""},
		{"patch", "helm.toolkit.fluxcd.io", "helmreleases", "apps", "podinfo"},
		{"list", "apiextensions.k8s.io", "customresourcedefinitions", "", "helmreleases.helm.toolkit.fluxcd.io"},
		{"watch", "apiextensions.k8s.io", "customresourcedefinitions", "", "helmreleases.helm.toolkit.fluxcd.io"},
		{"watch", "kustomize.toolkit.fluxcd.io", "kustomizations", "", ""},
		{"patch", "kustomize.toolkit.fluxcd.io", "kustomizations", "flux-system", "apps"},
		{"get", "source.toolkit.fluxcd.io", "gitrepositories", "flux-system", "flux-system"},
		{"get", "apps", "deployments", "apps", "web"},
		{"list", "", "events", "flux-system", ""},
		{"list", "batch", "jobs", "", ""},
		{"get", "batch", "jobs", "apps", "migrate"}, // a health-checked Job of a Kustomization (flux.ReadHealth)
		{"watch", "argoproj.io", "workflows", "", ""},
		{"list", "", "persistentvolumeclaims", "", ""},
		{"list", "", "services", "", ""},
		{"watch", "", "namespaces", "", ""},
		{"list", "discovery.k8s.io", "endpointslices", "", ""},
		{"watch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", ""},
		{"watch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", ""},
		{"create", "", "events", "apps", ""},
		{"create", "coordination.k8s.io", "leases", "syncmedic", ""},
		{"update", "coordination.k8s.io", "leases", "syncmedic", "syncmedic"},
		{"get", "", "configmaps", "syncmedic", "syncmedic-policy"},
		{"create", "", "configmaps", "syncmedic", ""},
		{"update", "", "configmaps", "syncmedic", "syncmedic-state"},
		{"update", "", "configmaps", "syncmedic", "syncmedic-state-silences"},
		{"get", "", "configmaps", "syncmedic", "syncmedic-state-silences"},
	}
	cannot := []check{
		{"delete", "batch", "jobs", "apps", "migrate"},
		{"deletecollection", "batch", "jobs", "apps", ""},
		{"get", "", "secrets", "kube-system", "bootstrap-token"},
		{"list", "", "secrets", "", ""},
		{"get", "", "secrets", "argocd", "argocd-secret"},
		{"patch", "apps", "deployments", "knative-serving", "webhook"},
		{"update", "apps", "deployments", "syncmedic", "syncmedic"},
		{"delete", "helm.toolkit.fluxcd.io", "helmreleases", "apps", "podinfo"},
		{"delete", "kustomize.toolkit.fluxcd.io", "kustomizations", "flux-system", "apps"},
		{"update", "kustomize.toolkit.fluxcd.io", "kustomizations/status", "flux-system", "apps"},
		{"delete", "argoproj.io", "workflows", "ci", "build-1"},
		// The Workflows remedy's write is opt-in (components/workflows-remedy).
		{"patch", "argoproj.io", "workflows", "ci", "build-1"},
		{"patch", "argoproj.io", "applications", "argocd", "shop"},
		{"update", "", "configmaps", "argocd", "argocd-cm"},
		{"update", "coordination.k8s.io", "leases", "kube-system", "kube-controller-manager"},
		{"delete", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "validation.webhook.serving.knative.dev"},
		// The policy is read only: serve cannot turn on auto or turn off its own kill switch.
		{"update", "", "configmaps", "syncmedic", "syncmedic-policy"},
		{"patch", "", "configmaps", "syncmedic", "syncmedic-policy"},
		{"patch", "", "configmaps", "syncmedic", "syncmedic-state"},
		{"list", "", "configmaps", "syncmedic", ""},
		{"watch", "", "configmaps", "syncmedic", "syncmedic-state"},
		// Events: created once per transition, never patched; the events.k8s.io API is not used.
		{"patch", "", "events", "apps", ""},
		{"create", "events.k8s.io", "events", "apps", ""},
		{"patch", "events.k8s.io", "events", "apps", ""},
		// One CRD, by name.
		{"list", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
		// The kube checks' informers list and watch; nothing gets one object (the install tests' audit log), but
		// Jobs, which the Kustomization health check reads one by one.
		{"get", "", "namespaces", "", "apps"},
		{"get", "", "services", "apps", "web"},
		{"get", "", "persistentvolumeclaims", "apps", "data"},
		{"get", "discovery.k8s.io", "endpointslices", "apps", "web-x1"},
		{"get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "validation.webhook.serving.knative.dev"},
		{"get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "istio-sidecar-injector"},
		{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "helmreleases.helm.toolkit.fluxcd.io"},
		{"get", "apiextensions.k8s.io", "customresourcedefinitions", "", "applications.argoproj.io"},
	}
	review := func(t *testing.T, c check) *authzv1.SubjectAccessReview {
		spec := serviceAccount
		spec.ResourceAttributes = &authzv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.namespace, Name: c.name}
		sar, err := env.Clientset.AuthorizationV1().SubjectAccessReviews().Create(context.Background(),
			&authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		return sar
	}
	name := func(c check) string {
		where := "cluster-wide"
		if c.namespace != "" {
			where = "in " + c.namespace
		}
		return fmt.Sprintf("%s %s.%s %s %s", c.verb, c.resource, c.group, c.name, where)
	}
	for _, c := range can {
		t.Run("can "+name(c), func(t *testing.T) {
			sar := review(t, c)
			require.True(t, sar.Status.Allowed, "denied: %s", sar.Status.Reason)
		})
	}
	for _, c := range cannot {
		t.Run("cannot "+name(c), func(t *testing.T) {
			sar := review(t, c)
			require.False(t, sar.Status.Allowed, "allowed: %s", sar.Status.Reason)
		})
	}
}
