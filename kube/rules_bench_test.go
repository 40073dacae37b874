package kube

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// benchCluster is an inventory the size of a busy cluster in which each kube rule matches once: 2,000 Jobs and a
// PVC stuck terminating, 50 healthy webhook configurations (each with its Service and a ready EndpointSlice) and
// the Namespace-owned knative one without its Service, 500 finished Workflows and one held by artifact-gc.
func benchCluster(b *testing.B) Inventory {
	inv := Inventory{ServicesKnown: true, EndpointsKnown: true}
	for i := range 2000 {
		inv.Objects = append(inv.Objects, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"namespace": fmt.Sprintf("team-%02d", i%50), "name": fmt.Sprintf("job-%04d", i), "finalizers": []any{"batch.kubernetes.io/job-tracking"}},
		}})
	}
	inv.Objects = append(inv.Objects, obj(b, `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: db, name: data-pg-0, deletionTimestamp: "2026-03-10T10:00:00Z", finalizers: [kubernetes.io/pvc-protection]}
`))
	for i := range 50 {
		ns, svc := fmt.Sprintf("webhooks-%02d", i), fmt.Sprintf("webhook-%02d", i)
		inv.WebhookConfigurations = append(inv.WebhookConfigurations, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": svc + ".example.com", "creationTimestamp": "2026-03-01T00:00:00Z"},
			"webhooks": []any{map[string]any{"name": svc + ".example.com", "failurePolicy": "Fail",
				"clientConfig": map[string]any{"service": map[string]any{"namespace": ns, "name": svc}}}},
		}})
		inv.Services = append(inv.Services, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"namespace": ns, "name": svc}}})
		inv.EndpointSlices = append(inv.EndpointSlices, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata":  map[string]any{"namespace": ns, "name": svc + "-abc12", "labels": map[string]any{"kubernetes.io/service-name": svc}},
			"endpoints": []any{map[string]any{"addresses": []any{"10.0.0.7"}, "conditions": map[string]any{"ready": true}}},
		}})
	}
	inv.WebhookConfigurations = append(inv.WebhookConfigurations, obj(b, knativeWebhook))
	for i := range 500 {
		inv.Workflows = append(inv.Workflows, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
			"metadata": map[string]any{"namespace": "ci", "name": fmt.Sprintf("build-%04d", i), "finalizers": []any{"workflows.argoproj.io/artifact-gc"}},
			"status":   map[string]any{"phase": "Succeeded"},
		}})
	}
	inv.Workflows = append(inv.Workflows, obj(b, failedWorkflow))
	return inv
}

// benchRule runs one rule over benchCluster, failing unless it finds exactly the n objects planted for it. No
// time is asserted.
func benchRule(b *testing.B, rule func(Inventory, time.Time, Thresholds) []syncmedic.Finding, want syncmedic.RuleID, n int) {
	inv, th := benchCluster(b), DefaultThresholds()
	b.ReportAllocs()
	for b.Loop() {
		fs := rule(inv, now, th)
		if len(fs) != n || fs[0].Rule != want {
			b.Fatalf("got %d findings, want %d %s", len(fs), n, want)
		}
	}
}

func BenchmarkStuckTerminating(b *testing.B) {
	// The PVC, and the Workflow held by artifact-gc (which Evaluate then leaves to ArtifactGCFinalizerStuck).
	benchRule(b, StuckTerminating, syncmedic.RuleStuckTerminating, 2)
}

func BenchmarkWebhookBackendMissing(b *testing.B) {
	benchRule(b, WebhookBackendMissing, syncmedic.RuleWebhookBackendMissing, 1)
}

func BenchmarkWebhookNamespaceOwned(b *testing.B) {
	benchRule(b, WebhookNamespaceOwned, syncmedic.RuleWebhookNamespaceOwned, 1)
}

func BenchmarkArtifactGCFinalizerStuck(b *testing.B) {
	benchRule(b, ArtifactGCFinalizerStuck, syncmedic.RuleArtifactGCFinalizerStuck, 1)
}
