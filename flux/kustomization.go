package flux

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// KustomizationGroup is the API group of Flux Kustomizations (kustomize-controller).
const KustomizationGroup = "kustomize.toolkit.fluxcd.io"

// KustomizationKind is the kind of a Flux Kustomization.
const KustomizationKind = "Kustomization"

// KustomizationNameLabel is the label kustomize-controller puts on every object it applies: the Kustomization's name.
const KustomizationNameLabel = "kustomize.toolkit.fluxcd.io/name"

// KustomizationFinalizer is kustomize-controller's finalizer (kustomizev1.KustomizationFinalizer in v1.7.3).
const KustomizationFinalizer = "finalizers.fluxcd.io"

// KustomizationAPIVersions are the Kustomization API versions the watcher reads, newest first: v1 (Flux ≥ 2.0),
// v1beta2 (Flux 0.x–2.x, served until Flux 2.7 removed it). The fields the rules read are the same in both.
var KustomizationAPIVersions = []string{"v1", "v1beta2"}

// Kustomization is the part of a Flux Kustomization (kustomize.toolkit.fluxcd.io/v1 in kustomize-controller v1.7.3)
// that the rules read, with the field names and JSON tags of the upstream v1 types. The upstream API module
// (github.com/fluxcd/kustomize-controller/api v1.7.3) needs Kubernetes 0.34 libraries the main module cannot take,
// so objects are read as unstructured and converted into this view (KustomizationFromUnstructured).
type Kustomization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              KustomizationSpec   `json:"spec,omitempty"`
	Status            KustomizationStatus `json:"status,omitempty"`
}

// KustomizationSpec is the part of the v1 KustomizationSpec the rules read.
type KustomizationSpec struct {
	DependsOn     []KustomizationDependency `json:"dependsOn,omitempty"`
	Interval      metav1.Duration           `json:"interval"`
	RetryInterval *metav1.Duration          `json:"retryInterval,omitempty"`
	Timeout       *metav1.Duration          `json:"timeout,omitempty"`
	SourceRef     SourceReference           `json:"sourceRef"`
	Suspend       bool                      `json:"suspend,omitempty"`
	Prune         bool                      `json:"prune"`
	Wait          bool                      `json:"wait,omitempty"`
	// Force is spec.force: recreate objects whose apply an immutable field refuses.
	Force bool `json:"force,omitempty"`
	// DeletionPolicy is "MirrorPrune" (the default), "Delete", "WaitForTermination" or "Orphan".
	DeletionPolicy string                 `json:"deletionPolicy,omitempty"`
	HealthChecks   []HealthCheckReference `json:"healthChecks,omitempty"`
}

// KustomizationDependency is one spec.dependsOn entry.
type KustomizationDependency struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// ReadyExpr is a CEL expression that replaces (or, with a feature gate, adds to) the built-in readiness check.
	ReadyExpr string `json:"readyExpr,omitempty"`
}

// SourceReference is spec.sourceRef.
type SourceReference struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// HealthCheckReference is one spec.healthChecks entry.
type HealthCheckReference struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// KustomizationStatus is the part of the v1 KustomizationStatus the rules read.
type KustomizationStatus struct {
	ObservedGeneration    int64              `json:"observedGeneration,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
	LastAppliedRevision   string             `json:"lastAppliedRevision,omitempty"`
	LastAttemptedRevision string             `json:"lastAttemptedRevision,omitempty"`
	// LastHandledReconcileAt is the reconcile.fluxcd.io/requestedAt value the controller last handled.
	LastHandledReconcileAt string             `json:"lastHandledReconcileAt,omitempty"`
	Inventory              *ResourceInventory `json:"inventory,omitempty"`
}

// ResourceInventory is status.inventory: the objects the Kustomization applied.
type ResourceInventory struct {
	Entries []ResourceRef `json:"entries"`
}

// ResourceRef is one inventory entry: ID is "<namespace>_<name>_<group>_<kind>", V the version.
type ResourceRef struct {
	ID string `json:"id"`
	V  string `json:"v"`
}

// KustomizationFromUnstructured converts a Kustomization read as unstructured (any of KustomizationAPIVersions).
func KustomizationFromUnstructured(u *unstructured.Unstructured) (*Kustomization, error) {
	k := &Kustomization{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, k); err != nil {
		return nil, fmt.Errorf("flux: decoding Kustomization %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return k, nil
}

// minTimeout is the shortest timeout kustomize-controller v1.7.3 uses (GetTimeout).
const minTimeout = 30 * time.Second

// Timeout is the timeout kustomize-controller v1.7.3 applies (api/v1 GetTimeout): spec.timeout, or the interval
// minus 30s when unset, and never less than 30s.
func (k *Kustomization) Timeout() time.Duration {
	d := k.Spec.Interval.Duration - minTimeout
	if k.Spec.Timeout != nil {
		d = k.Spec.Timeout.Duration
	}
	return max(d, minTimeout)
}

// RetryInterval is spec.retryInterval, or the interval when unset (kustomize-controller's GetRetryInterval).
func (k *Kustomization) RetryInterval() time.Duration {
	if k.Spec.RetryInterval != nil {
		return k.Spec.RetryInterval.Duration
	}
	return k.Spec.Interval.Duration
}

// Condition returns the condition of type t, or nil.
func (k *Kustomization) Condition(t string) *metav1.Condition {
	return apimeta.FindStatusCondition(k.Status.Conditions, t)
}

// IsReady is Ready=True at the current generation.
func (k *Kustomization) IsReady() bool {
	c := k.Condition(meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionTrue && k.Status.ObservedGeneration == k.Generation
}

// dependencyKey names a dependsOn entry (its namespace defaults to the Kustomization's).
func (k *Kustomization) dependencyKey(d KustomizationDependency) types.NamespacedName {
	ns := d.Namespace
	if ns == "" {
		ns = k.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: d.Name}
}

// SourceKey names spec.sourceRef (its namespace defaults to the Kustomization's).
func (k *Kustomization) SourceKey() types.NamespacedName {
	ns := k.Spec.SourceRef.Namespace
	if ns == "" {
		ns = k.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: k.Spec.SourceRef.Name}
}

// SourceArtifact is the artifact a Flux source (GitRepository, OCIRepository, Bucket) serves: status.artifact.
type SourceArtifact struct {
	// Kind is the source's kind.
	Kind string
	// Revision is status.artifact.revision ("" when the source has no artifact).
	Revision string
	// LastUpdateTime is status.artifact.lastUpdateTime: when source-controller produced the artifact.
	LastUpdateTime time.Time
}

// SourceArtifactOf reads status.artifact from a source read as unstructured.
func SourceArtifactOf(u *unstructured.Unstructured) SourceArtifact {
	rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
	at, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "lastUpdateTime")
	t, _ := time.Parse(time.RFC3339, at)
	return SourceArtifact{Kind: u.GetKind(), Revision: rev, LastUpdateTime: t}
}

// HeldBy is a health-checked object that is not ready, as the source read it.
type HeldBy struct {
	// Ref is "Kind/namespace/name".
	Ref string
	// Status says why it is not ready (e.g. "1 of 2 replicas available", "Job has not completed").
	Status string
}

// KubeEvent is a Kubernetes Event about the Kustomization (kustomize-controller records one for each event it
// sends to notification-controller).
type KubeEvent struct {
	Type, Reason, Message string
	Count                 int32
	Last                  time.Time
}

// KustomizationObservation is everything the Kustomization rules need to know about one Kustomization. Sources (the
// informer, the snapshot reader) fill it; rules only read it.
type KustomizationObservation struct {
	Kustomization *Kustomization
	// Dependencies are the spec.dependsOn Kustomizations found, by namespace/name; DependenciesKnown is true when
	// the source looked for them all.
	Dependencies      map[types.NamespacedName]*Kustomization
	DependenciesKnown bool
	// Source is spec.sourceRef's artifact; SourceKnown is true when the source read it.
	Source      SourceArtifact
	SourceKnown bool
	// NotReady are the health-checked objects (inventory workloads, spec.healthChecks) that are not ready, read
	// only while a health check looks stuck; HealthKnown is true when the source looked.
	NotReady    []HeldBy
	HealthKnown bool
	// Events are the Kubernetes Events about the Kustomization, read only while it is deleting; EventsKnown is true
	// when the source looked.
	Events      []KubeEvent
	EventsKnown bool
	// GenerationSeen is when the source first saw the Kustomization's current metadata.generation (zero: unknown,
	// as in a one-shot scan): the stale-revision clock of a spec kustomize-controller has not yet run to success
	// (status.observedGeneration behind: resumed from suspend, edited) starts there.
	GenerationSeen time.Time
	// Refused is the last apply refusal for an immutable field the source saw on this Kustomization's current
	// lastAttemptedRevision (nil: none, or a one-shot scan). kustomize-controller marks Ready=Unknown while it
	// retries, dropping the refusal's message; the immutable-field rule keeps judging it across those retries.
	Refused *Refusal
}

// Refusal is an apply refused for an immutable field: the Ready message, the revision it was for, and when the
// source first saw it.
type Refusal struct {
	Message, Revision string
	Since             time.Time
}

// KustomizationSubject is the subject under which a Kustomization's evaluations are reported. It does not start
// with "flux/" (the HelmRelease subjects), so neither watcher takes the other's subjects.
func KustomizationSubject(namespace, name string) string {
	return "flux-kustomization/" + namespace + "/" + name
}

// ParseKustomizationSubject is KustomizationSubject's inverse.
func ParseKustomizationSubject(subject string) (types.NamespacedName, bool) {
	rest, ok := strings.CutPrefix(subject, "flux-kustomization/")
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// hasFinalizer reports whether kustomize-controller's finalizer is on k.
func (k *Kustomization) hasFinalizer() bool {
	return slices.Contains(k.Finalizers, KustomizationFinalizer)
}
