package flux

import (
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// ReleaseObservation is everything the Flux rules need to know about one HelmRelease. Sources (the informer, the
// snapshot reader, an accepted event) fill it; rules only read it.
type ReleaseObservation struct {
	// Release is the HelmRelease in the v2 Go types, whichever API version it was read through (v2, or v2beta2 /
	// v2beta1 on a cluster that serves no v2, decoded as AddReleaseTypes describes).
	Release *helmv2.HelmRelease
	// Dependencies are the spec.dependsOn HelmReleases the source found, by namespace/name. DependenciesKnown is
	// true when the source looked for them, so that an absent dependency is really absent.
	Dependencies      map[types.NamespacedName]*helmv2.HelmRelease
	DependenciesKnown bool
	// ReadyExprs are the spec.dependsOn[].readyExpr CEL expressions (helm-controller API ≥ v1.4) by dependency, as
	// stored: the v1.1 Go types of Release drop the field, so sources read it from the object itself
	// (ReadyExprsOf). An expression replaces the built-in readiness check for its dependency.
	ReadyExprs map[types.NamespacedName]string
	// ControllerVersion is the helm-controller version when known (an event's reportingController metadata or the
	// controller image tag), e.g. "v0.36.2".
	ControllerVersion string
	// Storage is the newest revision of the release as Helm's storage records it (its release Secret), when the
	// source read it; StorageKnown is true when the source looked (so that no Secret means no release), and
	// StorageProblem says why it could not look (e.g. no permission to read Secrets).
	Storage        *HelmStorage
	StorageKnown   bool
	StorageProblem string
}

// ReadyExprsOf reads spec.dependsOn[].readyExpr from a HelmRelease as stored (unstructured), by dependency.
func ReadyExprsOf(u *unstructured.Unstructured) map[types.NamespacedName]string {
	deps, _, _ := unstructured.NestedSlice(u.Object, "spec", "dependsOn")
	var out map[types.NamespacedName]string
	for _, d := range deps {
		m, _ := d.(map[string]interface{})
		expr, _ := m["readyExpr"].(string)
		if expr == "" {
			continue
		}
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if ns == "" {
			ns = u.GetNamespace()
		}
		if out == nil {
			out = map[types.NamespacedName]string{}
		}
		out[types.NamespacedName{Namespace: ns, Name: name}] = expr
	}
	return out
}

// CRDObservation is the HelmRelease CustomResourceDefinition's storage state.
type CRDObservation struct {
	// Name is the CRD name (helmreleases.helm.toolkit.fluxcd.io).
	Name string
	// StoredVersions is status.storedVersions.
	StoredVersions []string
	// Served lists the versions spec.versions serves, and Storage the one stored.
	Served  []string
	Storage string
}

// Thresholds are the ages after which a Flux condition counts as stuck.
type Thresholds struct {
	// StaleStatus: observedGeneration behind generation, with old-format status, for longer than this.
	StaleStatus time.Duration
	// DependencyNotReady: Ready=False DependencyNotReady while all dependencies are Ready, for longer than this.
	DependencyNotReady time.Duration
	// ReleaseDeletion: a HelmRelease deleting, held by helm-controller's finalizer, for longer than this.
	ReleaseDeletion time.Duration
	// ReadyUnknown: Ready=Unknown (an action in progress) for longer than the action's timeout plus this.
	ReadyUnknown time.Duration
	// Kustomization: the margin the Kustomization rules add to kustomize-controller's own timing (dependency
	// re-check, spec.timeout, spec.interval) and the age of a held deletion.
	Kustomization time.Duration
	// ReconcileRequest: a reconcile.fluxcd.io/requestedAt the controller has not handled, for longer than the
	// object's timeout (twice a HelmRelease's: an action and its remediation) plus this.
	ReconcileRequest time.Duration
}

// DependencyRequeue is helm-controller's default --requeue-dependency: how often a release waiting on a dependency
// checks it again.
const DependencyRequeue = 30 * time.Second

// Warnings name thresholds that would report healthy states: a DependencyNotReady threshold within helm-controller's
// own dependency re-check (plus a margin) reports a bootstrap chain that the controller is about to resolve.
func (th Thresholds) Warnings() []string {
	if th.DependencyNotReady < 2*DependencyRequeue {
		return []string{fmt.Sprintf("the DependencyNotReady threshold %s is shorter than twice helm-controller's dependency re-check (%s by default): a dependency chain still starting up may be reported; use at least %s", th.DependencyNotReady, DependencyRequeue, 2*DependencyRequeue)}
	}
	return nil
}

// DefaultThresholds are the defaults the catalog documents.
func DefaultThresholds() Thresholds {
	return Thresholds{StaleStatus: 10 * time.Minute, DependencyNotReady: 5 * time.Minute, ReleaseDeletion: 5 * time.Minute, ReadyUnknown: 5 * time.Minute, Kustomization: 5 * time.Minute,
		ReconcileRequest: 5 * time.Minute}
}
