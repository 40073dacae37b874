package flux

import (
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/types"
)

// ReleaseObservation is everything the Flux rules need to know about one HelmRelease. Sources (the informer, the
// snapshot reader, an accepted event) fill it; rules only read it.
type ReleaseObservation struct {
	// Release is the HelmRelease as read through the v2 API (the apiserver converts v2beta1/v2beta2 objects).
	Release *helmv2.HelmRelease
	// Dependencies are the spec.dependsOn HelmReleases the source found, by namespace/name. DependenciesKnown is
	// true when the source looked for them, so that an absent dependency is really absent.
	Dependencies      map[types.NamespacedName]*helmv2.HelmRelease
	DependenciesKnown bool
	// ControllerVersion is the helm-controller version when known (an event's reportingController metadata or the
	// controller image tag), e.g. "v0.36.2".
	ControllerVersion string
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
}

// DefaultThresholds are the defaults the catalog documents.
func DefaultThresholds() Thresholds {
	return Thresholds{StaleStatus: 10 * time.Minute, DependencyNotReady: 5 * time.Minute}
}
