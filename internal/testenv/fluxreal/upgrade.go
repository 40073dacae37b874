package fluxreal

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerUpgrade records what ScenarioControllerUpgrade saw.
type ControllerUpgrade struct {
	Namespace, Name string
	// Old is the release as helm-controller v0.37.2 left it (read as v2beta2).
	Old *helmv2.HelmRelease
	// Inherited is the release after the CRDs and controller were upgraded, before the spec change, once the new
	// controller had reconciled it (its rewrite finished: no Reconciling condition) or 15 s passed (read as v2).
	Inherited *helmv2.HelmRelease
	// Rewritten says whether the new controller wrote the release when it started (before any spec change).
	Rewritten bool
	// Changed is the release right after the spec change; Caught is the release once observedGeneration reached
	// the new generation (nil when it did not within the wait), after CaughtAfter.
	Changed, Caught *helmv2.HelmRelease
	CaughtAfter     time.Duration
	// StoredVersions is the HelmRelease CRD's status.storedVersions after the upgrade.
	StoredVersions []string
}

// ScenarioControllerUpgrade performs a Flux upgrade on the stack's apiserver: a release installed and reconciled by
// helm-controller v0.37.2 with its own CRDs (v2beta2 storage), then helm-controller stopped, the CRDs replaced by
// v1.4.3's, v1.4.3 started, and the release's spec changed (a new chart version) — recording what the new
// controller does with the status the old one wrote. The stack must have been started with HelmControllerV037 on an
// apiserver of the test's own (testenv.KubePrivate): the CRD swap is cluster-wide.
func (s *Stack) ScenarioControllerUpgrade(t testing.TB, namespace string, repo *Repo, name string, wait time.Duration) ControllerUpgrade {
	t.Helper()
	if s.Helm != HelmControllerV037 {
		t.Fatalf("fluxreal: ScenarioControllerUpgrade needs a stack started with helm-controller %s, not %s", HelmControllerV037.Version, s.Helm.Version)
	}
	sc := ControllerUpgrade{Namespace: namespace, Name: name}
	sc.Old = s.Installed(t, namespace, repo, Release{Name: name})

	s.StopHelmController()
	if err := InstallCRDs(s.Env, HelmControllerV1.CRDDir()); err != nil {
		t.Fatalf("fluxreal: upgrading the HelmRelease CRD: %v", err)
	}
	if err := s.StartHelmController(HelmControllerV1); err != nil {
		t.Fatalf("fluxreal: starting helm-controller %s: %v", HelmControllerV1.Version, err)
	}
	// The new controller reconciles every release when it starts; it writes only what changed, so wait for a write
	// or, when none comes, a few seconds. A rewrite is read once the reconcile has ended (no Reconciling condition):
	// v1.4.3 first writes Reconciling=True "Fulfilling prerequisites", then removes it, and which of the two writes a
	// poll sees first is timing.
	before := s.Get(t, namespace, name).ResourceVersion
	settle := time.Now().Add(15 * time.Second)
	for {
		sc.Inherited = s.Get(t, namespace, name)
		sc.Rewritten = sc.Inherited.ResourceVersion != before
		if sc.Rewritten && Condition(sc.Inherited, meta.ReconcilingCondition) == nil {
			break
		}
		if time.Now().After(settle) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	repo.Publish(t, ConfigMapChart(name, "1.0.1"))
	s.PatchRelease(t, namespace, name, map[string]any{"chart": map[string]any{"spec": map[string]any{"version": "1.0.1"}}})
	changedAt := time.Now()
	sc.Changed = s.Get(t, namespace, name)
	deadline := changedAt.Add(wait)
	for time.Now().Before(deadline) {
		hr := s.Get(t, namespace, name)
		if hr.Status.ObservedGeneration == hr.Generation && IsReady(hr) {
			sc.Caught, sc.CaughtAfter = hr, time.Since(changedAt)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.Env.Client.Get(context.Background(), client.ObjectKey{Name: "helmreleases.helm.toolkit.fluxcd.io"}, crd); err != nil {
		t.Fatalf("fluxreal: reading the HelmRelease CRD: %v", err)
	}
	sc.StoredVersions = crd.Status.StoredVersions
	return sc
}

// ScenarioPreV2beta2Status leaves a release as a Flux < 2.2 cluster upgraded to Flux 2.7 does before the new
// helm-controller runs: installed for real (its Helm release exists), then — helm-controller stopped — its status
// replaced by what a v2beta1-era controller (helm-controller ≤ v0.36) wrote: Ready "Helm upgrade succeeded" with no
// release name, no status.history; then its chart version changed, so observedGeneration stays behind.
//
// The status is written by hand because no controller that writes it can run here: helm-controller v0.36.x and
// older do not download from the module proxy (v0.37.2, the oldest that does, already writes the v2beta2 status).
// Call StartHelmController to let the new controller at it. Use a stack of the test's own (Start).
func (s *Stack) ScenarioPreV2beta2Status(t testing.TB, namespace string, repo *Repo, name string) *helmv2.HelmRelease {
	t.Helper()
	// hand-written state: the v2beta1-era status no downloadable controller writes (see the doc above).
	s.preV2beta2Status(t, namespace, repo, name)
	repo.Publish(t, ConfigMapChart(name, "1.0.1"))
	s.PatchRelease(t, namespace, name, map[string]any{"chart": map[string]any{"spec": map[string]any{"version": "1.0.1"}}})
	return s.Get(t, namespace, name)
}

// ScenarioPreV2beta2StatusTemplateFails leaves the release as ScenarioPreV2beta2Status does, but with a spec change
// helm-controller cannot get past before its release step: a chart template label the apiserver rejects on the
// HelmChart (the HelmRelease's schema does not check label keys), so the server-side apply of the HelmChart template
// fails (internal/reconcile/helmchart_template.go in v0.37.2 and v1.4.3, reached before reconcileRelease) and every
// condition stays as the old controller wrote it, while the HelmChart itself stays in place, ready. The chart (1.0.0)
// and the values do not change: once FixTemplate removes the label, the release is in sync and needs no upgrade.
// Call StartHelmController to let the controller at it.
func (s *Stack) ScenarioPreV2beta2StatusTemplateFails(t testing.TB, namespace string, repo *Repo, name string) TemplateFails {
	t.Helper()
	// hand-written state: the v2beta1-era status no downloadable controller writes (see ScenarioPreV2beta2Status).
	s.preV2beta2Status(t, namespace, repo, name)
	sc := TemplateFails{Namespace: namespace, Name: name, Label: "team name"}
	s.PatchRelease(t, namespace, name, map[string]any{"chart": map[string]any{"metadata": map[string]any{
		"labels": map[string]any{sc.Label: "payments"}}}})
	sc.Release = s.Get(t, namespace, name)
	return sc
}

// TemplateFails is the state ScenarioPreV2beta2StatusTemplateFails leaves.
type TemplateFails struct {
	Namespace, Name string
	// Label is the chart template's label key the apiserver rejects on the HelmChart (it holds a space).
	Label string
	// Release is the release right after the spec change.
	Release *helmv2.HelmRelease
}

// FixTemplate removes the cause as a person would, in a new generation: the chart template loses its metadata, so
// the HelmChart applies again as it was.
func (sc TemplateFails) FixTemplate(t testing.TB, s *Stack) {
	t.Helper()
	s.PatchRelease(t, sc.Namespace, sc.Name, map[string]any{"chart": map[string]any{"metadata": nil}})
}

// preV2beta2Status installs name for real, stops helm-controller and replaces the release's status by what a
// v2beta1-era controller wrote (see ScenarioPreV2beta2Status).
func (s *Stack) preV2beta2Status(t testing.TB, namespace string, repo *Repo, name string) {
	t.Helper()
	hr := s.Installed(t, namespace, repo, Release{Name: name})
	s.StopHelmController()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(s.Helm.APIVersion)
	u.SetKind(helmv2.HelmReleaseKind)
	if err := s.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	at := metav1.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	u.Object["status"] = map[string]any{
		"observedGeneration":    hr.Generation,
		"lastAppliedRevision":   "1.0.0",
		"lastAttemptedRevision": "1.0.0",
		"lastReleaseRevision":   int64(1),
		"helmChart":             hr.Status.HelmChart,
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Release reconciliation succeeded", "lastTransitionTime": at},
			map[string]any{"type": "Released", "status": "True", "reason": "UpgradeSucceeded", "message": "Helm upgrade succeeded", "lastTransitionTime": at},
		},
	}
	// hand-written state: ScenarioPreV2beta2Status replaces the real release's status with what helm-controller <=
	// v0.36 wrote (it does not download); see its doc.
	if err := s.Env.Client.Status().Update(context.Background(), u); err != nil {
		t.Fatalf("fluxreal: writing the v2beta1-era status of %s/%s: %v", namespace, name, err)
	}
}
