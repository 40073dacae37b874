package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// HelmReleaseGVR returns the HelmRelease resource at an API version ("v2", "v2beta2" or "v2beta1").
func HelmReleaseGVR(version string) schema.GroupVersionResource {
	return helmv2.GroupVersion.WithResource("helmreleases").GroupResource().WithVersion(version)
}

// ScenarioHelmReleaseOldStatus creates a HelmRelease through apiVersion version (v2beta1 or v2beta2) and writes,
// through the status subresource at that version, the status an old helm-controller wrote: Ready=True with the
// old message "Release reconciliation succeeded", Released "Helm upgrade succeeded" with no release or chart named,
// no status.history. Then it changes the spec, so observedGeneration (1) is behind generation (2), as after an
// upgrade the new controller never reconciled. It returns the object read back as v2.
//
// hand-written state: the status of helm-controller ≤ v0.36 (v2beta1 era), which does not download here (v0.37.2,
// the oldest that does, already writes the v2beta2 status with status.history: internal/conformance/flux
// TestFluxUpgradeFromV037InheritsTheOldStatus), on an apiserver with no helm-controller. fluxreal's
// ScenarioPreV2beta2Status writes the same status on a real release for
// TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest. Callers say why they need this one.
func ScenarioHelmReleaseOldStatus(t testing.TB, env *Env, namespace, name, version string) *helmv2.HelmRelease {
	t.Helper()
	ctx := context.Background()
	hrs := env.Dynamic.Resource(HelmReleaseGVR(version)).Namespace(namespace)
	obj := helmReleaseObject(namespace, name, version, "podinfo", nil)
	created, err := hrs.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: creating HelmRelease through %s: %v", version, err)
	}
	at := created.GetCreationTimestamp().Add(time.Minute).UTC().Format(time.RFC3339)
	created.Object["status"] = map[string]interface{}{
		"observedGeneration": created.GetGeneration(),
		"conditions": []interface{}{
			condition(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Release reconciliation succeeded", at),
			condition(helmv2.ReleasedCondition, "True", helmv2.UpgradeSucceededReason, "Helm upgrade succeeded", at),
		},
		"lastAppliedRevision":         "6.5.0",
		"lastAttemptedRevision":       "6.5.0",
		"lastAttemptedValuesChecksum": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
		"lastReleaseRevision":         int64(4),
		"helmChart":                   namespace + "/" + namespace + "-" + name,
	}
	// hand-written state: ScenarioHelmReleaseOldStatus's status (see its doc); callers say why.
	updated, err := hrs.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("testenv: writing HelmRelease status through %s: %v", version, err)
	}
	_ = unstructured.SetNestedField(updated.Object, map[string]interface{}{"replicaCount": int64(2)}, "spec", "values")
	if _, err := hrs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("testenv: changing HelmRelease spec through %s: %v", version, err)
	}
	return GetHelmRelease(t, env, namespace, name)
}

// DependencyNotReady is the seed incident of a HelmRelease that says its dependency is not ready while the
// dependency is Ready at its current generation.
type DependencyNotReady struct {
	Dependency *helmv2.HelmRelease
	Dependent  *helmv2.HelmRelease
}

// ScenarioDependencyNotReady creates HelmRelease "db" (through v2, Ready=True at its current generation, status
// written by a current controller) and HelmRelease "app" depending on it (through v2beta2, Ready=False reason
// DependencyNotReady "dependency 'ns/db' is not ready"). It returns both read back as v2.
//
// hand-written state: a dependent still DependencyNotReady while its dependency is Ready, with no helm-controller
// to re-check it. The real helm-controller holds this only until its next --requeue-dependency re-check
// (internal/conformance/flux TestFlux22ServeWatchesV2beta2AndAnnouncesWhatIsStuck,
// TestDependencyNotReadyTakesTheWholeFluxPath); callers say why they need it held.
func ScenarioDependencyNotReady(t testing.TB, env *Env, namespace string) DependencyNotReady {
	t.Helper()
	db := createWithStatus(t, env, helmReleaseObject(namespace, "db", "v2", "postgresql", nil), func(created *unstructured.Unstructured, at string) map[string]interface{} {
		msg := fmt.Sprintf("Helm upgrade succeeded for release %s/db.v3 with chart postgresql@15.5.0", namespace)
		return map[string]interface{}{
			"observedGeneration": created.GetGeneration(),
			"conditions": []interface{}{
				condition(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, msg, at),
				condition(helmv2.ReleasedCondition, "True", helmv2.UpgradeSucceededReason, msg, at),
			},
			"history": []interface{}{map[string]interface{}{
				"name": "db", "namespace": namespace, "version": int64(3), "status": "deployed",
				"chartName": "postgresql", "chartVersion": "15.5.0", "appVersion": "16.3.0",
				"digest":        "sha256:7f2b1c0bd6b5ea0e6a3f9d8a16e7f1c2b3a4d5e6f708192a3b4c5d6e7f809112",
				"configDigest":  "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
				"firstDeployed": at, "lastDeployed": at,
			}},
			"lastAttemptedRevision": "15.5.0", "lastAttemptedGeneration": created.GetGeneration(),
			"lastAttemptedReleaseAction": "upgrade", "helmChart": namespace + "/" + namespace + "-db",
			"storageNamespace": namespace,
		}
	})
	deps := []interface{}{map[string]interface{}{"name": "db"}}
	// hand-written state: the dependent's DependencyNotReady status (see ScenarioDependencyNotReady's doc); callers say
	// why.
	app := createWithStatus(t, env, helmReleaseObject(namespace, "app", "v2beta2", "podinfo", deps), func(created *unstructured.Unstructured, at string) map[string]interface{} {
		msg := fmt.Sprintf("dependency '%s/db' is not ready", namespace)
		return map[string]interface{}{
			"observedGeneration": created.GetGeneration(),
			"conditions": []interface{}{
				condition(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, msg, at),
			},
		}
	})
	return DependencyNotReady{Dependency: db, Dependent: app}
}

// createWithStatus creates obj through its apiVersion, writes status(created, timestamp) through the status
// subresource at the same version, and returns the object read back as v2.
//
// hand-written state: see its callers, ScenarioDependencyNotReady.
func createWithStatus(t testing.TB, env *Env, obj *unstructured.Unstructured,
	status func(created *unstructured.Unstructured, at string) map[string]interface{}) *helmv2.HelmRelease {
	t.Helper()
	ctx := context.Background()
	version := obj.GroupVersionKind().Version
	hrs := env.Dynamic.Resource(HelmReleaseGVR(version)).Namespace(obj.GetNamespace())
	created, err := hrs.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: creating HelmRelease %s through %s: %v", obj.GetName(), version, err)
	}
	created.Object["status"] = status(created, created.GetCreationTimestamp().Add(time.Minute).UTC().Format(time.RFC3339))
	// hand-written state: createWithStatus's status; its callers say which.
	if _, err := hrs.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("testenv: writing HelmRelease %s status through %s: %v", obj.GetName(), version, err)
	}
	return GetHelmRelease(t, env, obj.GetNamespace(), obj.GetName())
}

// GetHelmRelease reads a HelmRelease as v2 (the storage version).
func GetHelmRelease(t testing.TB, env *Env, namespace, name string) *helmv2.HelmRelease {
	t.Helper()
	hr := &helmv2.HelmRelease{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, hr); err != nil {
		t.Fatalf("testenv: reading HelmRelease %s/%s: %v", namespace, name, err)
	}
	return hr
}

func helmReleaseObject(namespace, name, version, chart string, dependsOn []interface{}) *unstructured.Unstructured {
	spec := map[string]interface{}{
		"interval": "5m",
		"chart": map[string]interface{}{"spec": map[string]interface{}{
			"chart": chart, "version": "*",
			"sourceRef": map[string]interface{}{"kind": "HelmRepository", "name": "charts"},
		}},
	}
	if dependsOn != nil {
		spec["dependsOn"] = dependsOn
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": helmv2.GroupVersion.Group + "/" + version,
		"kind":       helmv2.HelmReleaseKind,
		"metadata":   map[string]interface{}{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

func condition(typ, status, reason, message, at string) map[string]interface{} {
	return map[string]interface{}{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": at, "observedGeneration": int64(1)}
}
