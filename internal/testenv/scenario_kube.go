package testenv

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// ArtifactGCFinalizer is the finalizer Argo Workflows puts on a Workflow whose artifacts it garbage-collects.
const ArtifactGCFinalizer = "workflows.argoproj.io/artifact-gc"

// WorkflowGVR is Argo Workflows' Workflow resource (no Go types in this module: use Env.Dynamic).
var WorkflowGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

// ScenarioWorkflowArtifactGCStuck creates a Failed Workflow with no output artifacts that carries the artifact-gc
// finalizer and deletes it, so it is stuck terminating, with one garbage-collection Pod recorded in
// status.artifactGCStatus.podsRecouped: the state in which the workflow controller acts on
// spec.artifactGC.forceFinalizerRemoval, so syncmedic's workflows/force-finalizer-removal applies. It returns the
// Workflow as read back.
func ScenarioWorkflowArtifactGCStuck(t testing.TB, env *Env, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	// hand-written state: the builder's shared status write, with a garbage-collection Pod recorded; callers say why.
	return scenarioWorkflowArtifactGC(t, env, namespace, name, true)
}

// ScenarioWorkflowArtifactGCWithoutGCPod is ScenarioWorkflowArtifactGCStuck as v3.5.10 leaves it (argo-workflows
// #13499, played in internal/conformance/workflows): no garbage-collection Pod recorded, so the workflow controller
// ignores spec.artifactGC.forceFinalizerRemoval and syncmedic must offer and apply nothing.
func ScenarioWorkflowArtifactGCWithoutGCPod(t testing.TB, env *Env, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	// hand-written state: the builder's shared status write, as v3.5.10 leaves it; callers say why.
	return scenarioWorkflowArtifactGC(t, env, namespace, name, false)
}

func scenarioWorkflowArtifactGC(t testing.TB, env *Env, namespace, name string, gcPod bool) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	wfs := env.Dynamic.Resource(WorkflowGVR).Namespace(namespace)
	wf := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata": map[string]interface{}{
			"name": name, "namespace": namespace,
			"finalizers": []interface{}{ArtifactGCFinalizer},
			"labels": map[string]interface{}{
				"workflows.argoproj.io/completed": "true", "workflows.argoproj.io/phase": "Failed"},
		},
		"spec": map[string]interface{}{
			"entrypoint": "main",
			"artifactGC": map[string]interface{}{"strategy": "OnWorkflowDeletion"},
			"templates": []interface{}{map[string]interface{}{
				"name":      "main",
				"container": map[string]interface{}{"image": "alpine:3.20", "command": []interface{}{"sh", "-c", "exit 1"}},
			}},
		},
	}}
	created, err := wfs.Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: creating Workflow: %v", err)
	}
	status := failedWorkflowStatus(name, created.GetCreationTimestamp().Time)
	if gcPod {
		// hand-written state: a garbage-collection Pod recorded as ended (podsRecouped), the only state in which the
		// workflow controller honours forceFinalizerRemoval; no Argo Workflows controller runs where this builder is
		// used, and the failed workflow without artifacts that v3.5.10 really leaves has none (the other builder).
		status["artifactGCStatus"] = map[string]interface{}{"strategiesProcessed": map[string]interface{}{"OnWorkflowDeletion": true},
			"podsRecouped": map[string]interface{}{name + "-artgc-wfdel-2166136261": true}}
	}
	created.Object["status"] = status
	// hand-written state: a failed Workflow held by artifact-gc: no Argo Workflows controller runs in these tests (the
	// real v3.5.10 produces it in internal/conformance/workflows TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its
	// status is written as the workflow-controller writes it; callers say why they need it.
	if _, err := writeStatus(ctx, wfs, created); err != nil {
		t.Fatalf("testenv: writing Workflow status: %v", err)
	}
	if err := wfs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("testenv: deleting Workflow: %v", err)
	}
	got, err := wfs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("testenv: reading Workflow back: %v", err)
	}
	if got.GetDeletionTimestamp() == nil {
		t.Fatalf("testenv: Workflow %s/%s is not terminating", namespace, name)
	}
	return got
}

// failedWorkflowStatus is the status the workflow controller writes for a one-step workflow whose step failed
// without producing artifacts.
func failedWorkflowStatus(name string, created time.Time) map[string]interface{} {
	start := created.Add(time.Second).UTC().Format(time.RFC3339)
	end := created.Add(5 * time.Second).UTC().Format(time.RFC3339)
	return map[string]interface{}{
		"phase": "Failed", "startedAt": start, "finishedAt": end,
		"message":  "Error (exit code 1)",
		"progress": "0/1",
		"nodes": map[string]interface{}{name: map[string]interface{}{
			"id": name, "name": name, "displayName": name, "type": "Pod", "templateName": "main",
			"phase": "Failed", "message": "Error (exit code 1)", "startedAt": start, "finishedAt": end,
			"progress": "0/1",
		}},
		"artifactGCStatus": map[string]interface{}{"notSpecified": true},
	}
}

// WebhookBackendGone is the seed incident of an app deletion that removed a webhook's Service while the webhook
// configuration, owned by its Namespace (controller: true, as Knative ≤1.15 sets it), stays and blocks writes.
type WebhookBackendGone struct {
	Namespace *corev1.Namespace
	Webhook   *admissionregistrationv1.ValidatingWebhookConfiguration
	// Service is the name of the deleted Service the webhook calls.
	Service string
}

// ScenarioWebhookBackendGone creates a namespace, a Service "webhook" in it, a ValidatingWebhookConfiguration with
// failurePolicy Fail calling that Service and owned by the Namespace, then deletes the Service. The webhook's rules
// cover ConfigMap writes in that namespace only, so a ConfigMap create there really fails ("failed calling
// webhook") while the rest of the shared apiserver is unaffected.
func ScenarioWebhookBackendGone(t testing.TB, env *Env) WebhookBackendGone {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("knative-serving")}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("testenv: creating namespace: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: ns.Name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "webhook"},
			Ports: []corev1.ServicePort{{Name: "https-webhook", Port: 443}}},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatalf("testenv: creating webhook Service: %v", err)
	}
	wh := namespaceOwnedWebhook(ns, svc.Name)
	if err := env.Client.Create(ctx, wh); err != nil {
		t.Fatalf("testenv: creating webhook configuration: %v", err)
	}
	if err := env.Client.Delete(ctx, svc); err != nil {
		t.Fatalf("testenv: deleting webhook Service: %v", err)
	}
	return WebhookBackendGone{Namespace: ns, Webhook: wh, Service: svc.Name}
}

func namespaceOwnedWebhook(ns *corev1.Namespace, service string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{
			Name: "config." + ns.Name + ".webhook.serving.knative.dev",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns.Name,
				UID: ns.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "config.webhook.serving.knative.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: ns.Name, Name: service, Path: ptr.To("/config-validation"), Port: ptr.To[int32](443)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				corev1.LabelMetadataName: ns.Name}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
}
