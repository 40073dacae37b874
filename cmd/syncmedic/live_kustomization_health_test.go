package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// TestLiveScanNamesTheWorkloadHoldingAKustomization: `scan --kubeconfig` reads, as serve does, the health-checked
// workloads of a Kustomization whose health check has outlived spec.timeout, so flux/kustomization-health-check-stuck
// names the Deployment that never became ready (and one that is gone) instead of saying they were not read.
func TestLiveScanNamesTheWorkloadHoldingAKustomization(t *testing.T) {
	env := testenv.KubePrivate(t)
	require.NoError(t, fluxreal.InstallCRDs(env, "crds", fluxreal.SourceCRDDir, fluxreal.KustomizeCRDDir))
	ctx := context.Background()
	ns := env.Namespace(t)
	// A Deployment no controller rolls out (this apiserver has none): its rollout is never observed, as a Deployment
	// whose controller is stuck or whose Pods never come up stays not ready.
	one := int32(1)
	require.NoError(t, env.Client.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}))
	ks := env.Dynamic.Resource(schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}).Namespace(ns)
	created, err := ks.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "apps", "namespace": ns},
		"spec": map[string]any{"interval": "10m", "timeout": "5m", "path": "./apps", "prune": true, "wait": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "flux-system"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	at := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	msg := "Running health checks for revision main@sha1:b2e4c6a8d0f1e3c5a7b9d1f3e5c7a9b1d3f5e7c9 with a timeout of 5m0s"
	created.Object["status"] = map[string]any{"observedGeneration": int64(0),
		"inventory": map[string]any{"entries": []any{
			map[string]any{"id": ns + "_web_apps_Deployment", "v": "v1"},
			map[string]any{"id": ns + "_worker_apps_Deployment", "v": "v1"},
			map[string]any{"id": ns + "_settings__ConfigMap", "v": "v1"},
		}},
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress", "lastTransitionTime": at},
			map[string]any{"type": "Reconciling", "status": "True", "reason": "Progressing", "message": msg, "lastTransitionTime": at},
		}}
	// hand-written state: the status kustomize-controller v1.7.3 leaves when it stops mid health check (no
	// kustomize-controller runs in these cmd tests; the real one reaches it in internal/conformance/flux, the
	// Kustomization health-check scenario, which names the Deployment through serve).
	_, err = ks.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)

	_, out, errOut := runCLI(t, "scan", "--kubeconfig", env.Kubeconfig, "-o", "json", "--rule", string(syncmedic.RuleKustomizationHealthCheckStuck))
	var r syncmedic.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r), errOut)
	require.Len(t, r.Findings, 1, "%+v", r.Findings)
	f := r.Findings[0]
	require.Equal(t, "Kustomization/"+ns+"/apps", f.Object.Kind+"/"+f.Object.Namespace+"/"+f.Object.Name)
	require.Contains(t, f.Summary, "; held by Deployment/"+ns+"/web, Deployment/"+ns+"/worker")
	ev := map[string]string{}
	for _, e := range f.Evidence {
		ev[e.Field] = e.Value
	}
	require.Equal(t, "observedGeneration 0 < generation 1", ev["not ready Deployment/"+ns+"/web"])
	require.Equal(t, "not found", ev["not ready Deployment/"+ns+"/worker"])
	require.NotContains(t, ev, "health-checked objects", "the objects were read")
	require.Len(t, r.Read, 1)
	require.Contains(t, r.Read[0], "; and the health-checked workloads of 1 Kustomization(s) in progress past their timeout", "the report says what was read")
}
