package flux

import (
	"context"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
)

// evaluate runs the rules for one key against the cache, reports the findings, and arms the key's threshold timer.
func (w *Watcher) evaluate(ctx context.Context, key watchKey, sink syncmedic.Sink) {
	now := w.opts.Now()
	if key.crd {
		w.evaluateCRD(ctx, key, now, sink)
		return
	}
	hr := &helmv2.HelmRelease{}
	if err := w.cache.Get(ctx, key.nn, hr); err != nil {
		if apierrors.IsNotFound(err) {
			syncmedic.ReportGone(ctx, sink, key.subject()) // deleted: its incidents close now
			return
		}
		w.log.Warn("reading HelmRelease from the cache", "subject", key.subject(), "error", err)
		return
	}
	obs := ReleaseObservation{Release: hr, Dependencies: map[types.NamespacedName]*helmv2.HelmRelease{}, DependenciesKnown: true,
		ControllerVersion: w.version.get(ctx, now)}
	for _, d := range hr.Spec.DependsOn {
		nn := types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
		if nn.Namespace == "" {
			nn.Namespace = hr.Namespace
		}
		dep := &helmv2.HelmRelease{}
		switch err := w.cache.Get(ctx, nn, dep); {
		case err == nil:
			obs.Dependencies[nn] = dep
		case apierrors.IsNotFound(err):
		default: // e.g. a namespace outside the watched set: do not claim it is missing
			obs.DependenciesKnown = false
		}
	}
	if c := condition(hr, meta.ReadyCondition); c != nil && c.Reason == meta.DependencyNotReadyReason && len(hr.Spec.DependsOn) > 0 {
		// The v1.1 Go types drop dependsOn[].readyExpr (API ≥ v1.4): read it from the object as stored, only for the
		// few releases the dependency rule may judge.
		if exprs, err := w.readyExprs(ctx, key.nn); err != nil {
			w.log.Debug("reading dependsOn readyExpr", "subject", key.subject(), "error", err)
			obs.DependenciesKnown = false
		} else {
			obs.ReadyExprs = exprs
		}
	}
	if at := ReadyUnknownDeadline(hr, w.opts.Thresholds); !at.IsZero() && !now.Before(at) {
		w.readStorage(ctx, hr, &obs)
	}
	findings := EvaluateRelease(obs, now, w.opts.Thresholds)
	w.log.Debug("evaluated HelmRelease", "subject", key.subject(), "findings", len(findings))
	sink.Observe(ctx, key.subject(), findings)
	if at, ok := nextThreshold(hr, obs.Dependencies, now, w.opts.Thresholds); ok {
		w.queue.AddAfter(key, at.Sub(now))
	}
}

// readStorage reads, when allowed, Helm's release Secrets of hr straight from the apiserver into obs.
func (w *Watcher) readStorage(ctx context.Context, hr *helmv2.HelmRelease, obs *ReleaseObservation) {
	if !w.opts.ReadHelmStorage {
		obs.StorageProblem = "serve reads no Secrets unless --flux-read-helm-storage is set"
		return
	}
	name, ns := StorageRelease(hr)
	sel, err := labels.Parse(fmt.Sprintf(HelmStorageSelector, name))
	if err != nil {
		obs.StorageProblem = err.Error()
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "SecretList"})
	if err := w.direct.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		obs.StorageProblem = fmt.Sprintf("listing Secrets %s in namespace %s: %v", sel, ns, err)
		return
	}
	var found []HelmStorage
	for i := range list.Items {
		s, err := HelmStorageOf(&list.Items[i])
		if err != nil {
			w.log.Debug("decoding Helm's release record", "secret", s.Secret, "error", err)
		}
		if s.Secret != "" {
			found = append(found, s)
		}
	}
	obs.Storage, obs.StorageKnown = LatestStorage(hr, found), true
}

// readyExprs reads spec.dependsOn[].readyExpr of one HelmRelease straight from the apiserver.
func (w *Watcher) readyExprs(ctx context.Context, nn types.NamespacedName) (map[types.NamespacedName]string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.releaseGVK())
	if err := w.direct.Get(ctx, nn, u); err != nil {
		return nil, err
	}
	return ReadyExprsOf(u), nil
}

func (w *Watcher) evaluateCRD(ctx context.Context, key watchKey, now time.Time, sink syncmedic.Sink) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := w.cache.Get(ctx, types.NamespacedName{Name: key.nn.Name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			syncmedic.ReportGone(ctx, sink, key.subject())
			return
		}
		w.log.Warn("reading the HelmRelease CRD from the cache", "subject", key.subject(), "error", err)
		return
	}
	sink.Observe(ctx, key.subject(), EvaluateCRD(CRDObservationOf(crd), now))
}

// CRDObservationOf reads a CustomResourceDefinition's storage state.
func CRDObservationOf(crd *apiextensionsv1.CustomResourceDefinition) CRDObservation {
	obs := CRDObservation{Name: crd.Name, StoredVersions: append([]string(nil), crd.Status.StoredVersions...)}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			obs.Served = append(obs.Served, v.Name)
		}
		if v.Storage {
			obs.Storage = v.Name
		}
	}
	return obs
}

// nextThreshold returns the earliest future moment a time-based rule could start matching hr: the stale-status
// threshold counted from the Ready condition's transition, and the DependencyNotReady threshold counted from it and
// from each known dependency's Ready transition. An extra evaluation is harmless; a missed one would delay detection,
// so every candidate is armed without re-checking each rule's preconditions.
func nextThreshold(hr *helmv2.HelmRelease, deps map[types.NamespacedName]*helmv2.HelmRelease, now time.Time, th Thresholds) (time.Time, bool) {
	var candidates []time.Time
	if hr.Status.ObservedGeneration < hr.Generation {
		candidates = append(candidates, readySince(hr).Add(th.StaleStatus))
	}
	if c := condition(hr, meta.ReadyCondition); c != nil && c.Status == "False" && c.Reason == meta.DependencyNotReadyReason {
		candidates = append(candidates, c.LastTransitionTime.Add(th.DependencyNotReady))
		for _, d := range deps {
			candidates = append(candidates, readySince(d).Add(th.DependencyNotReady))
		}
	}
	if dt := hr.DeletionTimestamp; dt != nil {
		candidates = append(candidates, dt.Add(th.ReleaseDeletion))
	}
	if at := ReadyUnknownDeadline(hr, th); !at.IsZero() {
		candidates = append(candidates, at)
	}
	if !hr.Spec.Suspend && hr.DeletionTimestamp == nil {
		if at := requestDeadline(hr.Annotations, hr.Status.LastHandledReconcileAt, releaseRequestBudget(hr), th); !at.IsZero() {
			candidates = append(candidates, at)
		}
	}
	var next time.Time
	for _, t := range candidates {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next, !next.IsZero()
}
