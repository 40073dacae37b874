package kube

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Inventory is the cluster state the kube rules read. Sources (the live scanner, the snapshot reader) fill it;
// rules only read it. A kind the source did not look at is marked unknown, and no rule claims that an object of an
// unknown kind is missing.
type Inventory struct {
	// Objects are the watched objects checked for being stuck terminating (Jobs, Workflows, PVCs, webhook
	// configurations by default), as unstructured objects.
	Objects []*unstructured.Unstructured
	// WebhookConfigurations are admissionregistration.k8s.io/v1 Validating- and MutatingWebhookConfigurations.
	WebhookConfigurations []*unstructured.Unstructured
	// Services are v1 Services; ServicesKnown is true when the source listed Services (in every namespace a
	// webhook points at).
	Services      []*unstructured.Unstructured
	ServicesKnown bool
	// EndpointSlices are discovery.k8s.io/v1 EndpointSlices and Endpoints are v1 Endpoints; EndpointsKnown is true
	// when the source listed either of them.
	EndpointSlices []*unstructured.Unstructured
	Endpoints      []*unstructured.Unstructured
	EndpointsKnown bool
	// Namespaces are v1 Namespaces; NamespacesKnown is true when the source listed them. The webhook rules read
	// them to say whether a backend's (or an owner's) Namespace still exists or is Terminating.
	Namespaces      []*unstructured.Unstructured
	NamespacesKnown bool
	// Pods are v1 Pods from a dump (the snapshot reader keeps those not Ready; the live scanner does not watch Pods):
	// the webhook rule dates a Service without ready endpoints from the readiness of the Pods its selector picks.
	Pods []*unstructured.Unstructured
	// Workflows are argoproj.io/v1alpha1 Workflows.
	Workflows []*unstructured.Unstructured
	// BackendDownSince says, by Service ("namespace/name"), since when a live source has seen a webhook's backend
	// missing or without ready endpoints, and from what (it keeps the map across evaluations and drops recovered
	// entries). A source without history (a dump) leaves it empty, and the rule dates the problem from the objects'
	// own timestamps.
	BackendDownSince map[string]BackendDown
	// ArgoCDRulesRun is true when the argocd rules judge this cluster's Argo CD hooks and Applications (the source
	// also reads the Argo CD instance that manages them): kube/stuck-terminating then leaves Argo CD's own finalizers
	// to them (argoCDRuleFor). When false no argocd rule sees those objects, and stuck-terminating reports them too.
	ArgoCDRulesRun bool
	// WebhookCallFailures are sync or event messages that say `failed calling webhook "…"`, with where they came from.
	WebhookCallFailures []WebhookCallFailure
}

// WebhookCallFailure is a message from a tool that a call to an admission webhook failed.
type WebhookCallFailure struct {
	// Source names where the message came from ("Application argocd/guestbook", "HelmRelease apps/redis").
	Source  string
	Message string
	At      time.Time
}

// Thresholds are the ages after which a cluster condition counts as stuck.
type Thresholds struct {
	// Terminating: an object with a deletionTimestamp older than this and finalizers left.
	Terminating time.Duration
	// WebhookBackend: how long a webhook may be without a backend (creation grace period) before it is reported.
	WebhookBackend time.Duration
	// ArtifactGC: a Workflow being deleted longer than this with only the artifact-gc finalizer blocking.
	ArtifactGC time.Duration
}

// DefaultThresholds are the defaults the catalog documents.
func DefaultThresholds() Thresholds {
	return Thresholds{Terminating: 2 * time.Minute, WebhookBackend: time.Minute, ArtifactGC: 2 * time.Minute}
}
