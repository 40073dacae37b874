package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
)

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func obj(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.ReplaceAll(y, "\t", "  ")), &u.Object))
	return u
}

const knativeWebhook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: config.webhook.serving.knative.dev
  creationTimestamp: "2026-03-01T00:00:00Z"
  ownerReferences:
  - apiVersion: v1
    kind: Namespace
    name: knative-serving
    uid: 5b1d
    controller: true
webhooks:
- name: config.webhook.serving.knative.dev
  failurePolicy: Fail
  clientConfig:
    service: {namespace: knative-serving, name: webhook}
`

const webhookService = `
apiVersion: v1
kind: Service
metadata: {namespace: knative-serving, name: webhook}
`

func slice(ready bool) string {
	r := "true"
	if !ready {
		r = "false"
	}
	return `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  namespace: knative-serving
  name: webhook-abc12
  labels: {kubernetes.io/service-name: webhook}
endpoints:
- addresses: [10.0.0.7]
  conditions: {ready: ` + r + `}
`
}

const failedWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  namespace: ci
  name: build-arm64-x7k2p
  deletionTimestamp: "2026-03-10T11:00:00Z"
  finalizers: [workflows.argoproj.io/artifact-gc]
  labels: {app.kubernetes.io/instance: ci-pipelines}
spec:
  artifactGC: {strategy: OnWorkflowDeletion}
status:
  phase: Failed
  message: "exec format error"
  nodes:
    build-arm64-x7k2p: {phase: Failed}
`

func TestEvaluate(t *testing.T) {
	th := DefaultThresholds()
	tests := []struct {
		name  string
		inv   func(t *testing.T) Inventory
		want  []syncmedic.RuleID
		check func(t *testing.T, fs []syncmedic.Finding)
	}{
		{
			name: "a Fail webhook whose Service was deleted blocks writes",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, ServicesKnown: true, EndpointsKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookBackendMissing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Summary, "Service knative-serving/webhook does not exist")
				require.Contains(t, fs[0].Remedy.Commands[1], `"value":"Ignore"`)
			},
		},
		{
			name: "a webhook whose Service exists with ready endpoints is fine",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{obj(t, slice(true))}, EndpointsKnown: true}
			},
		},
		{
			name: "a webhook whose Service has only unready endpoints has no backend",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{obj(t, slice(false))}, EndpointsKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookBackendMissing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Summary, "has no ready endpoints")
			},
		},
		{
			name: "an old webhook whose endpoints turned unready seconds ago (a rollout) is not reported yet",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				sl := obj(t, slice(false))
				sl.SetAnnotations(map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": now.Add(-10 * time.Second).Format(time.RFC3339)})
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{sl}, EndpointsKnown: true}
			},
		},
		{
			name: "an old webhook whose endpoints have been unready past the threshold is reported since they went down",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				sl := obj(t, slice(false))
				sl.SetAnnotations(map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": now.Add(-5 * time.Minute).Format(time.RFC3339)})
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, Services: []*unstructured.Unstructured{obj(t, webhookService)},
					ServicesKnown: true, EndpointSlices: []*unstructured.Unstructured{sl}, EndpointsKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookBackendMissing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, now.Add(-5*time.Minute), fs[0].Since)
			},
		},
		{
			name: "a backend the live scanner saw go down moments ago is not reported yet, even with its Service gone",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, ServicesKnown: true, EndpointsKnown: true,
					BackendDownSince: map[string]BackendDown{"knative-serving/webhook": {Since: now.Add(-5 * time.Second), Evidence: "first seen down by this scanner"}}}
			},
		},
		{
			name: "a webhook is never reported missing its Service when Services were not listed",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}}
			},
		},
		{
			name: "a webhook with failurePolicy Ignore is not blocking",
			inv: func(t *testing.T) Inventory {
				w := obj(t, strings.Replace(knativeWebhook, "failurePolicy: Fail", "failurePolicy: Ignore", 1))
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, ServicesKnown: true}
			},
		},
		{
			name: "a webhook configuration controlled by its Namespace is reported, and so is its missing backend",
			inv: func(t *testing.T) Inventory {
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{obj(t, knativeWebhook)}, ServicesKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookBackendMissing, syncmedic.RuleWebhookNamespaceOwned},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "kubectl -n knative-serving set env deployment/webhook WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP=true", fs[1].Remedy.Commands[0])
			},
		},
		{
			name: "a namespace-owned webhook that is not Knative's gets no Knative-only command",
			inv: func(t *testing.T) Inventory {
				w := obj(t, strings.NewReplacer("config.webhook.serving.knative.dev", "validation.webhook.config.karpenter.sh",
					"knative-serving", "kube-system", "name: webhook}", "name: karpenter}").Replace(knativeWebhook))
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookNamespaceOwned},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				for _, c := range fs[0].Remedy.Commands {
					require.NotContains(t, c, "WEBHOOK_DISABLE_NAMESPACE_OWNERSHIP")
				}
				require.NotContains(t, fs[0].Remedy.Description, "Knative")
				require.Contains(t, fs[0].Remedy.Commands[0], "validatingwebhookconfiguration.admissionregistration.k8s.io validation.webhook.config.karpenter.sh")
			},
		},
		{
			name: "a webhook call failure from a sync message is tied to the configuration that declares it",
			inv: func(t *testing.T) Inventory {
				w := obj(t, knativeWebhook)
				w.SetOwnerReferences(nil)
				return Inventory{WebhookConfigurations: []*unstructured.Unstructured{w}, WebhookCallFailures: []WebhookCallFailure{{
					Source: "Application argocd/hello", At: now.Add(-time.Minute),
					Message: `Internal error occurred: failed calling webhook "config.webhook.serving.knative.dev": Post "https://webhook.knative-serving.svc:443/config-validation": service "webhook" not found`}}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWebhookBackendMissing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "ValidatingWebhookConfiguration", fs[0].Object.Kind)
				require.Equal(t, "Application argocd/hello", fs[0].Evidence[0].Field)
			},
		},
		{
			name: "a failed workflow with no artifacts held by artifact-gc while deleting is stuck, not generically terminating",
			inv: func(t *testing.T) Inventory {
				wf := obj(t, failedWorkflow)
				// A garbage-collection Pod recorded: the controller acts on forceFinalizerRemoval (without one the
				// finding offers no action, TestArtifactGCCountsArtifactsWhereverTheStatusKeepsThem).
				pods := map[string]interface{}{"build-arm64-x7k2p-artgc-wfdel-2166136261": true}
				require.NoError(t, unstructured.SetNestedMap(wf.Object, pods, "status", "artifactGCStatus", "podsRecouped"))
				return Inventory{Workflows: []*unstructured.Unstructured{wf}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, syncmedic.ActionForceFinalizerRemoval, f.Remedy.Action)
				require.Equal(t, "ci-pipelines", f.Remedy.Params["app"])
				require.Contains(t, f.Remedy.Commands[0], "argocd app patch-resource ci-pipelines --kind Workflow")
				require.Equal(t, syncmedic.ToolArgoWorkflows, f.Object.Tool)
			},
		},
		{
			name: "a workflow with the artifact-gc finalizer that is not being deleted is fine",
			inv: func(t *testing.T) Inventory {
				wf := obj(t, failedWorkflow)
				wf.SetDeletionTimestamp(nil)
				return Inventory{Workflows: []*unstructured.Unstructured{wf}}
			},
		},
		{
			name: "a deleted workflow that has artifacts to collect is left to its garbage collection",
			inv: func(t *testing.T) Inventory {
				wf := obj(t, failedWorkflow)
				require.NoError(t, unstructured.SetNestedSlice(wf.Object, []interface{}{map[string]interface{}{"name": "binary"}}, "status", "nodes", "build-arm64-x7k2p", "outputs", "artifacts"))
				return Inventory{Workflows: []*unstructured.Unstructured{wf}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleStuckTerminating},
		},
		{
			name: "a PVC terminating past the threshold is explained by its finalizer",
			inv: func(t *testing.T) Inventory {
				return Inventory{Objects: []*unstructured.Unstructured{obj(t, `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: db, name: data-pg-0, deletionTimestamp: "2026-03-10T10:00:00Z", finalizers: [kubernetes.io/pvc-protection]}
`)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleStuckTerminating},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Evidence[2].Value, "find the Pod that still mounts it")
			},
		},
		{
			name: "an object deleted a moment ago is not stuck yet",
			inv: func(t *testing.T) Inventory {
				return Inventory{Objects: []*unstructured.Unstructured{obj(t, `
apiVersion: batch/v1
kind: Job
metadata: {namespace: db, name: j, deletionTimestamp: "2026-03-10T11:59:30Z", finalizers: [foregroundDeletion]}
`)}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := Evaluate(tt.inv(t), now, th)
			var got []syncmedic.RuleID
			for _, f := range fs {
				got = append(got, f.Rule)
				require.NotEmpty(t, f.Evidence)
				require.NotEmpty(t, f.Remedy.Commands)
				require.NotEmpty(t, f.Fingerprint)
			}
			require.Equal(t, tt.want, got)
			if tt.check != nil {
				tt.check(t, fs)
			}
		})
	}
}

func TestArgoCDApp(t *testing.T) {
	tests := []struct{ name, y, want string }{
		{"the tracking annotation names the app", "metadata: {annotations: {argocd.argoproj.io/tracking-id: 'shop:batch/Job:shop/migrate'}}", "shop"},
		{"an app in any namespace is named without its namespace prefix", "metadata: {annotations: {argocd.argoproj.io/tracking-id: 'team-a_shop:batch/Job:shop/migrate'}}", "shop"},
		{"the instance label names the app", "metadata: {labels: {app.kubernetes.io/instance: web}}", "web"},
		{"an untracked object has no app", "metadata: {name: x}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Equal(t, tt.want, ArgoCDApp(obj(t, tt.y))) })
	}
}

func BenchmarkEvaluate(b *testing.B) {
	inv := Inventory{WebhookConfigurations: []*unstructured.Unstructured{obj(b, knativeWebhook)}, ServicesKnown: true,
		Workflows: []*unstructured.Unstructured{obj(b, failedWorkflow)}}
	th := DefaultThresholds()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if len(Evaluate(inv, now, th)) != 3 {
			b.Fatal("want 3 findings")
		}
	}
}
