package flux

import (
	"fmt"
	"slices"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AddReleaseTypes registers helm-controller's v2 HelmRelease and HelmReleaseList Go types in s as the HelmRelease of
// API version version (one of ReleaseAPIVersions), and as nothing else. A client or informer cache built on s then
// lists, watches, reads and patches HelmReleases through that version — the one the cluster serves — and decodes each
// object straight into the v2 types the rules read.
//
// That decoding is the conversion, and it is exact for everything the rules read: the HelmRelease CRD converts
// between its versions with strategy None, so every version returns the same stored object, and v2beta1, v2beta2
// (as helm-controller v0.37 serves them) and v2 give every field the rules read (conditions, observedGeneration,
// history, lastAttemptedRevision, lastReleaseRevision, install/upgradeFailures, storageNamespace,
// lastHandledReconcileAt, and spec.dependsOn, suspend, releaseName, targetNamespace) the same JSON name and shape.
// A status written by a pre-v0.37 controller simply has no history, which is what flux/helmrelease-stale-status
// looks for. What v2 dropped is not read by any rule and is left out: status.lastAppliedRevision, the deprecated
// spec.chart.spec.valuesFile and the kustomize post-renderer's patchesJson6902/patchesStrategicMerge.
func AddReleaseTypes(s *runtime.Scheme, version string) error {
	if !slices.Contains(ReleaseAPIVersions, version) {
		return fmt.Errorf("flux: HelmRelease API version %q is not one of %v", version, ReleaseAPIVersions)
	}
	gv := ReleaseGroupVersion(version)
	s.AddKnownTypeWithName(gv.WithKind(helmv2.HelmReleaseKind), &helmv2.HelmRelease{})
	s.AddKnownTypeWithName(gv.WithKind(helmv2.HelmReleaseKind+"List"), &helmv2.HelmReleaseList{})
	metav1.AddToGroupVersion(s, gv)
	return nil
}

// ReleaseGroupVersion is helm.toolkit.fluxcd.io at version.
func ReleaseGroupVersion(version string) schema.GroupVersion {
	return schema.GroupVersion{Group: helmv2.GroupVersion.Group, Version: version}
}
