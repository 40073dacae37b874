package flux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
)

// ErrNoKustomizationAPI says the cluster serves none of KustomizationAPIVersions: kustomize-controller is not
// installed.
var ErrNoKustomizationAPI = errors.New("the cluster serves no Kustomization API (kustomize.toolkit.fluxcd.io v1 or v1beta2): is Flux's kustomize-controller installed?")

// ServedKustomizationAPIVersion asks discovery for the newest of KustomizationAPIVersions the cluster serves.
func ServedKustomizationAPIVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("flux: %w", err)
	}
	for _, v := range KustomizationAPIVersions {
		gv := schema.GroupVersion{Group: KustomizationGroup, Version: v}
		list, err := dc.ServerResourcesForGroupVersion(gv.String())
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return "", fmt.Errorf("flux: discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Kind == KustomizationKind && !strings.Contains(r.Name, "/") {
				return v, nil
			}
		}
	}
	return "", ErrNoKustomizationAPI
}

// KustomizationWatcherOptions configure a KustomizationWatcher.
type KustomizationWatcherOptions struct {
	Config *rest.Config
	// Namespaces limits the Kustomizations watched; empty watches every namespace.
	Namespaces []string
	// Thresholds are the rule thresholds (Kustomization; zero takes the default).
	Thresholds Thresholds
	// Log receives evaluation lines at debug level; nil discards.
	Log *slog.Logger
	// Now is the rules' clock; nil means time.Now.
	Now func() time.Time
	// APIVersion is the Kustomization version to watch; empty asks discovery (ServedKustomizationAPIVersion).
	APIVersion string
}

// KustomizationWatcher is the live source of Flux Kustomizations: an informer over Kustomizations (the newest API
// version served, read as unstructured and converted to the v1 view), evaluating the Kustomization rules on every
// change of a Kustomization or of one it depends on, on Trigger, and when a threshold is crossed (a per-object
// timer). Sources, health-checked objects and Events are read straight from the apiserver, only when a rule needs
// them. Evaluations are reported under KustomizationSubject.
type KustomizationWatcher struct {
	opts   KustomizationWatcherOptions
	log    *slog.Logger
	cache  cache.Cache
	direct client.Client
	queue  workqueue.TypedDelayingInterface[types.NamespacedName]
	gvk    schema.GroupVersionKind
	synced atomic.Bool
	// seen is when each Kustomization's current generation was first seen (KustomizationObservation.GenerationSeen).
	seenMu sync.Mutex
	seen   map[types.NamespacedName]generationSeen
	// refused is each Kustomization's last immutable-field refusal (KustomizationObservation.Refused), under seenMu.
	refused map[types.NamespacedName]refusalSeen
}

// refusalSeen is a refusal of one object (by UID).
type refusalSeen struct {
	uid types.UID
	Refusal
}

// refusal returns k's immutable-field refusal on its current lastAttemptedRevision, remembering a new one (seen now,
// or at Ready's transition when that is earlier) and forgetting it once Ready says anything else than the refusal
// or a retry in progress, or the revision changes.
func (w *KustomizationWatcher) refusal(k *Kustomization, now time.Time) *Refusal {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	nn := types.NamespacedName{Namespace: k.Namespace, Name: k.Name}
	old, had := w.refused[nn]
	had = had && old.uid == k.UID && old.Revision == k.Status.LastAttemptedRevision
	ready := k.Condition(meta.ReadyCondition)
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, ImmutableMessage):
		r := Refusal{Message: ready.Message, Revision: k.Status.LastAttemptedRevision, Since: now}
		if t := ready.LastTransitionTime.Time; !t.IsZero() && t.Before(now) {
			r.Since = t
		}
		if had {
			r.Since = old.Since
		}
		w.refused[nn] = refusalSeen{uid: k.UID, Refusal: r}
		return &r
	case had && ready != nil && ready.Status == metav1.ConditionUnknown:
		r := old.Refusal
		return &r
	}
	delete(w.refused, nn)
	return nil
}

// generationSeen is a generation of one object (by UID) and when the watcher first saw it.
type generationSeen struct {
	uid        types.UID
	generation int64
	at         time.Time
}

// generationSeen returns when k's current generation was first seen: now if it is new.
func (w *KustomizationWatcher) generationSeen(k *Kustomization, now time.Time) time.Time {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	nn := types.NamespacedName{Namespace: k.Namespace, Name: k.Name}
	if s, ok := w.seen[nn]; ok && s.uid == k.UID && s.generation == k.Generation {
		return s.at
	}
	w.seen[nn] = generationSeen{uid: k.UID, generation: k.Generation, at: now}
	return now
}

// forget drops what the watcher remembers of a deleted Kustomization.
func (w *KustomizationWatcher) forget(nn types.NamespacedName) {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	delete(w.seen, nn)
	delete(w.refused, nn)
}

var _ syncmedic.Source = (*KustomizationWatcher)(nil)

// NewKustomizationWatcher builds the informer cache; nothing is watched until Run.
func NewKustomizationWatcher(o KustomizationWatcherOptions) (*KustomizationWatcher, error) {
	if o.Config == nil {
		return nil, errors.New("flux kustomization watcher: a Kubernetes REST config is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.APIVersion == "" {
		v, err := ServedKustomizationAPIVersion(o.Config)
		if err != nil {
			return nil, fmt.Errorf("flux kustomization watcher: %w", err)
		}
		o.APIVersion = v
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	direct, err := client.New(o.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("flux kustomization watcher: %w", err)
	}
	c, err := cache.New(o.Config, namespaced(cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()}, o.Namespaces))
	if err != nil {
		return nil, fmt.Errorf("flux kustomization watcher: %w", err)
	}
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{Name: "flux-kustomizations"})
	return &KustomizationWatcher{opts: o, log: log.With("source", "flux-kustomization"), cache: c, direct: direct, queue: q,
		gvk: schema.GroupVersionKind{Group: KustomizationGroup, Version: o.APIVersion, Kind: KustomizationKind}, seen: map[types.NamespacedName]generationSeen{},
		refused: map[types.NamespacedName]refusalSeen{}}, nil
}

// APIVersion is the Kustomization API version watched.
func (w *KustomizationWatcher) APIVersion() string { return w.gvk.Version }

// Ready returns nil once the informer has synced.
func (w *KustomizationWatcher) Ready() error {
	if !w.synced.Load() {
		return errors.New("flux kustomization watcher: informer not synced yet")
	}
	return nil
}

// Trigger asks for an immediate evaluation of a KustomizationSubject; other subjects are ignored.
func (w *KustomizationWatcher) Trigger(subject string) {
	if nn, ok := ParseKustomizationSubject(subject); ok {
		w.queue.Add(nn)
	}
}

func (w *KustomizationWatcher) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.gvk)
	return u
}

// Run watches until ctx is cancelled, reporting every evaluation to sink.
func (w *KustomizationWatcher) Run(ctx context.Context, sink syncmedic.Sink) error {
	defer w.queue.ShutDown()
	inf, err := w.cache.GetInformer(ctx, w.newObject())
	if err != nil {
		return fmt.Errorf("flux kustomization watcher: informer: %w", err)
	}
	if _, err := inf.AddEventHandler(onEveryChange(func(o interface{}) { w.changed(ctx, o) })); err != nil {
		return err
	}
	return runQueue(ctx, "flux kustomization watcher", w.cache, w.queue, func() {
		w.synced.Store(true)
		w.log.Info("flux kustomization watcher synced", "namespaces", w.opts.Namespaces, "apiVersion", w.gvk.GroupVersion().String())
	}, func(key types.NamespacedName) { w.evaluate(ctx, key, sink) })
}

// changed queues the Kustomization and every Kustomization that depends on it.
func (w *KustomizationWatcher) changed(ctx context.Context, o interface{}) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	w.queue.Add(types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(w.gvk.GroupVersion().WithKind(KustomizationKind + "List"))
	if err := w.cache.List(ctx, list); err != nil {
		return
	}
	for i := range list.Items {
		k, err := KustomizationFromUnstructured(&list.Items[i])
		if err != nil {
			continue
		}
		for _, d := range k.Spec.DependsOn {
			if k.dependencyKey(d) == (types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}) {
				w.queue.Add(types.NamespacedName{Namespace: k.Namespace, Name: k.Name})
			}
		}
	}
}

// evaluate runs the rules for one Kustomization, reports the findings and arms its threshold timer.
func (w *KustomizationWatcher) evaluate(ctx context.Context, nn types.NamespacedName, sink syncmedic.Sink) {
	now := w.opts.Now()
	subject := KustomizationSubject(nn.Namespace, nn.Name)
	u := w.newObject()
	if err := w.cache.Get(ctx, nn, u); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(nn)
			syncmedic.ReportGone(ctx, sink, subject)
			return
		}
		w.log.Warn("reading Kustomization from the cache", "subject", subject, "error", err)
		return
	}
	k, err := KustomizationFromUnstructured(u)
	if err != nil {
		w.log.Warn("decoding Kustomization", "subject", subject, "error", err)
		return
	}
	obs := w.observe(ctx, k, now)
	findings := EvaluateKustomization(obs, now, w.opts.Thresholds)
	w.log.Debug("evaluated Kustomization", "subject", subject, "findings", len(findings))
	sink.Observe(ctx, subject, findings)
	if at := KustomizationNextDeadline(obs, now, w.opts.Thresholds); !at.IsZero() {
		w.queue.AddAfter(nn, at.Sub(now))
	}
}

// observe fills what the rules read beside the Kustomization: its dependencies (cache), its source's artifact,
// and — only when a rule may judge them — the health-checked objects and the Events.
func (w *KustomizationWatcher) observe(ctx context.Context, k *Kustomization, now time.Time) KustomizationObservation {
	obs := KustomizationObservation{Kustomization: k, Dependencies: map[types.NamespacedName]*Kustomization{}, DependenciesKnown: true,
		GenerationSeen: w.generationSeen(k, now), Refused: w.refusal(k, now)}
	for _, d := range k.Spec.DependsOn {
		nn := k.dependencyKey(d)
		u := w.newObject()
		switch err := w.cache.Get(ctx, nn, u); {
		case err == nil:
			if dep, err := KustomizationFromUnstructured(u); err == nil {
				obs.Dependencies[nn] = dep
			} else {
				obs.DependenciesKnown = false
			}
		case apierrors.IsNotFound(err):
		default:
			obs.DependenciesKnown = false
		}
	}
	if src, err := w.readSource(ctx, k); err == nil {
		obs.Source, obs.SourceKnown = src, true
	} else {
		w.log.Debug("reading the Kustomization's source", "kustomization", k.Namespace+"/"+k.Name, "error", err)
	}
	if HealthCheckDue(k, now, w.opts.Thresholds) {
		obs.NotReady, obs.HealthKnown = ReadHealth(ctx, w.direct, k)
	}
	if !k.DeletionTimestamp.IsZero() {
		obs.Events, obs.EventsKnown = w.readEvents(ctx, k)
	}
	return obs
}

// sourceVersions are the source.toolkit.fluxcd.io versions tried for a source, newest first.
var sourceVersions = []string{"v1", "v1beta2"}

// readSource reads spec.sourceRef's status.artifact straight from the apiserver.
func (w *KustomizationWatcher) readSource(ctx context.Context, k *Kustomization) (SourceArtifact, error) {
	var lastErr error
	for _, v := range sourceVersions {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: v, Kind: k.Spec.SourceRef.Kind})
		if lastErr = w.direct.Get(ctx, k.SourceKey(), u); lastErr == nil {
			return SourceArtifactOf(u), nil
		}
	}
	return SourceArtifact{}, lastErr
}

// HealthCheckDue reports whether k's health check has been in progress (Ready=Unknown) for longer than spec.timeout
// plus the Kustomization threshold at now: when flux/kustomization-health-check-stuck may report it, and its
// health-checked objects are worth reading (ReadHealth).
func HealthCheckDue(k *Kustomization, now time.Time, th Thresholds) bool {
	c := k.Condition(meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionUnknown && !now.Before(c.LastTransitionTime.Add(k.Timeout()+th.kustomization()))
}

// ReadHealth reads through c the workloads of k's inventory and spec.healthChecks (Deployments, StatefulSets,
// DaemonSets, Jobs) and returns those not ready; ok is false when one could not be read (retry: the evidence then
// says the objects were not read).
func ReadHealth(ctx context.Context, c client.Reader, k *Kustomization) ([]HeldBy, bool) {
	var held []HeldBy
	ok := true
	for _, h := range HealthRefs(k) {
		r := h.HealthCheckReference
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(r.APIVersion)
		u.SetKind(r.Kind)
		if err := c.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, u); err != nil {
			if apierrors.IsNotFound(err) {
				held = append(held, HeldBy{Ref: h.Ref(), Status: "not found"})
				continue
			}
			ok = false
			continue
		}
		if why := WorkloadNotReady(u); why != "" {
			held = append(held, HeldBy{Ref: h.Ref(), Status: why})
		}
	}
	return held, ok
}

// HealthRef is one workload a Kustomization's health check waits for.
type HealthRef struct {
	HealthCheckReference
	// FromInventory: the workload is in the inventory, so kustomize-controller applied it (and labelled it
	// kustomize.toolkit.fluxcd.io/name); otherwise it is only named in spec.healthChecks.
	FromInventory bool
}

// Ref is "Kind/namespace/name".
func (h HealthRef) Ref() string { return h.Kind + "/" + h.Namespace + "/" + h.Name }

// HealthRefs lists the workloads (Deployments, StatefulSets, DaemonSets, Jobs) of k's inventory and
// spec.healthChecks, once each, inventory first.
func HealthRefs(k *Kustomization) []HealthRef {
	var refs []HealthRef
	if inv := k.Status.Inventory; inv != nil {
		for _, e := range inv.Entries {
			parts := strings.Split(e.ID, "_")
			if len(parts) != 4 {
				continue
			}
			refs = append(refs, HealthRef{HealthCheckReference{APIVersion: groupVersion(parts[2], e.V), Kind: parts[3], Name: parts[1], Namespace: parts[0]}, true})
		}
	}
	for _, r := range k.Spec.HealthChecks {
		refs = append(refs, HealthRef{HealthCheckReference: r})
	}
	var out []HealthRef
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.Ref()] || !workloadKinds[r.Kind] {
			continue
		}
		seen[r.Ref()] = true
		out = append(out, r)
	}
	return out
}

func groupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// workloadKinds are the kinds ReadHealth judges (kstatus readiness of the common workloads).
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true, "Job": true}

// WorkloadNotReady says why a Deployment, StatefulSet, DaemonSet or Job is not ready as kstatus would judge it
// (rollout not observed or incomplete, Job not complete), or "" when it is.
func WorkloadNotReady(u *unstructured.Unstructured) string {
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if u.GetKind() != "Job" && observed < gen {
		return fmt.Sprintf("observedGeneration %d < generation %d", observed, gen)
	}
	num := func(f ...string) int64 { n, _, _ := unstructured.NestedInt64(u.Object, f...); return n }
	switch u.GetKind() {
	case "Deployment", "StatefulSet":
		want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		field := "availableReplicas"
		if u.GetKind() == "StatefulSet" {
			field = "readyReplicas"
		}
		if have := num("status", field); have < want {
			return fmt.Sprintf("%d of %d replicas %s", have, want, strings.TrimSuffix(field, "Replicas"))
		}
	case "DaemonSet":
		if want, have := num("status", "desiredNumberScheduled"), num("status", "numberAvailable"); have < want {
			return fmt.Sprintf("%d of %d pods available", have, want)
		}
	case "Job":
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]interface{})
			if m["status"] == "True" && m["type"] == "Complete" {
				return ""
			}
			if m["status"] == "True" && m["type"] == "Failed" {
				return fmt.Sprintf("Job failed: %v", m["message"])
			}
		}
		return fmt.Sprintf("Job has not completed (%d active, %d failed)", num("status", "active"), num("status", "failed"))
	}
	return ""
}

// readEvents lists the Kubernetes Events about the Kustomization; ok is false when they could not be read.
func (w *KustomizationWatcher) readEvents(ctx context.Context, k *Kustomization) ([]KubeEvent, bool) {
	list := &corev1.EventList{}
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", KustomizationKind),
		fields.OneTermEqualSelector("involvedObject.name", k.Name))
	if err := w.direct.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		w.log.Debug("listing the Kustomization's events", "kustomization", k.Namespace+"/"+k.Name, "error", err)
		return nil, false
	}
	return KubeEventsOf(list.Items), true
}

// KubeEventsOf converts Kubernetes Events into KubeEvents.
func KubeEventsOf(items []corev1.Event) []KubeEvent {
	out := make([]KubeEvent, 0, len(items))
	for _, e := range items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		count := e.Count
		if count == 0 {
			count = 1
		}
		out = append(out, KubeEvent{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count, Last: last})
	}
	return out
}

// RequestKustomizationReconcile writes reconcile.fluxcd.io/requestedAt on Kustomization namespace/name through
// a merge patch of the annotation alone (gvk selects the API version), with the value `flux reconcile
// kustomization` writes.
func RequestKustomizationReconcile(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, nn types.NamespacedName, now time.Time) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(nn.Namespace)
	u.SetName(nn.Name)
	value := now.Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, value)
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return "", err
	}
	return value, nil
}

// Remediers are flux/reconcile-kustomization on the watcher's client and API version.
func (w *KustomizationWatcher) Remediers() syncmedic.Remediers {
	return syncmedic.Remediers{syncmedic.ActionFluxReconcileKustomization: syncmedic.RemedierFunc(w.remediate)}
}

func (w *KustomizationWatcher) remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionFluxReconcileKustomization, DryRun: dryRun}
	if f.Object.Kind != KustomizationKind || f.Object.Group != KustomizationGroup {
		return out, syncmedic.Permanent(fmt.Errorf("flux/reconcile-kustomization applies to Kustomizations, not %s", f.Object))
	}
	nn := types.NamespacedName{Namespace: f.Object.Namespace, Name: f.Object.Name}
	u := w.newObject()
	if err := w.direct.Get(ctx, nn, u); err != nil {
		if apierrors.IsNotFound(err) {
			return out, syncmedic.Permanent(fmt.Errorf("Kustomization %s is gone: %w", nn, err))
		}
		return out, fmt.Errorf("reading Kustomization %s (retried): %w", nn, err)
	}
	why, err := decideKustomizationRequest(u, f.Since)
	if err != nil {
		return out, syncmedic.Permanent(err)
	}
	if why != "" {
		out.Steps = append(out.Steps, why)
		return out, nil
	}
	step := fmt.Sprintf("merge-patch Kustomization %s: metadata.annotations[%s] = <now, RFC 3339 with nanoseconds>", nn, meta.ReconcileRequestAnnotation)
	if dryRun {
		out.Steps = append(out.Steps, "would "+step)
		return out, nil
	}
	if err := syncmedic.BeforeWrite(ctx, "merge-patch Kustomization "+nn.String()); err != nil {
		return out, err
	}
	value, err := RequestKustomizationReconcile(ctx, w.direct, w.gvk, nn, w.opts.Now())
	if apierrors.IsNotFound(err) {
		return out, syncmedic.Permanent(fmt.Errorf("Kustomization %s is gone: %w", nn, err))
	}
	if err != nil {
		return out, fmt.Errorf("annotating Kustomization %s (retried): %w", nn, err)
	}
	out.Changed = true
	out.Steps = append(out.Steps, strings.Replace(step, "<now, RFC 3339 with nanoseconds>", value, 1))
	return out, nil
}

// decideKustomizationRequest says whether a reconcile request may be written on u for a condition that began at
// since: not while the previous request is unhandled (why says so), and never again once a request made after
// since was handled and the condition still holds (an error wrapping ErrRequestUnsuccessful: a person must look).
func decideKustomizationRequest(u *unstructured.Unstructured, since time.Time) (why string, err error) {
	req := u.GetAnnotations()[meta.ReconcileRequestAnnotation]
	handled, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
	if req != "" && req != handled {
		return fmt.Sprintf("reconcile request %s is not handled yet (status.lastHandledReconcileAt %q); not writing another", req, handled), nil
	}
	if req != "" && requestAfter(req, since) {
		return "", fmt.Errorf("%w: reconcile %s was handled and the Kustomization is still stuck; look at kustomize-controller and the Kustomization's events", ErrRequestUnsuccessful, req)
	}
	return "", nil
}
