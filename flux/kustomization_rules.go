package flux

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
)

// KustomizeDependencyRequeue is kustomize-controller's default --requeue-dependency: v1.7.3 re-checks the
// dependencies of a Kustomization that said DependencyNotReady after this long (not after spec.retryInterval, which
// applies to failed applies).
const KustomizeDependencyRequeue = 30 * time.Second

// PruneFailedMessage is the Warning event kustomize-controller v1.7.3 records when the finalizer's prune fails
// (it writes no condition for it).
const PruneFailedMessage = "pruning for deleted resource failed"

// EvaluateKustomization runs every Kustomization rule.
func EvaluateKustomization(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	if obs.Kustomization == nil {
		return nil
	}
	var out []syncmedic.Finding
	for _, rule := range []func(KustomizationObservation, time.Time, Thresholds) []syncmedic.Finding{
		KustomizationDeletionStuck, KustomizationDependencyNotReady, KustomizationHealthCheckStuck, KustomizationStaleRevision,
		KustomizationRequestNotHandled, KustomizationImmutableField,
	} {
		out = append(out, rule(obs, now, th)...)
	}
	return out
}

// KustomizationDependencyNotReady reports a Kustomization that is Ready=False with reason DependencyNotReady while
// every spec.dependsOn Kustomization is Ready=True at its current generation, for longer than kustomize-controller's
// dependency re-check (--requeue-dependency, 30 s) plus the threshold, counted from the moment the last dependency
// became Ready: a bootstrap chain turns Ready link by link and each dependent is re-checked within the requeue, so
// it stays silent. It is also silent when a dependency is missing or not ready, when one has a readyExpr (CEL
// replaces the built-in check), when the dependent is suspended, and when a dependency on the same source has not
// applied the source's current revision (v1.7.3 says "revision is not up to date" then, rightly).
func KustomizationDependencyNotReady(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	ready := k.Condition(meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != meta.DependencyNotReadyReason ||
		!obs.DependenciesKnown || len(k.Spec.DependsOn) == 0 || k.Spec.Suspend || !k.DeletionTimestamp.IsZero() {
		return nil
	}
	since := ready.LastTransitionTime.Time
	var ev []syncmedic.Evidence
	for _, d := range k.Spec.DependsOn {
		nn := k.dependencyKey(d)
		dep := obs.Dependencies[nn]
		if d.ReadyExpr != "" || dep == nil || !dep.IsReady() {
			return nil
		}
		if dep.Spec.SourceRef.Kind == k.Spec.SourceRef.Kind && dep.SourceKey() == k.SourceKey() &&
			(!obs.SourceKnown || dep.Status.LastAppliedRevision != obs.Source.Revision) {
			return nil
		}
		depReady := dep.Condition(meta.ReadyCondition).LastTransitionTime.Time
		if depReady.After(since) {
			since = depReady
		}
		ev = append(ev, syncmedic.Evidence{Field: "dependency " + nn.String(),
			Value: fmt.Sprintf("Ready=True, observedGeneration %d = generation %d, lastAppliedRevision %s", dep.Status.ObservedGeneration, dep.Generation, dep.Status.LastAppliedRevision),
			Since: timePtr(depReady)})
	}
	if now.Sub(since) < KustomizeDependencyRequeue+th.kustomization() {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleKustomizationDependencyNotReady, kustomizationRef(k),
		fmt.Sprintf("Kustomization %s/%s says a dependency is not ready, but every dependency has been Ready for %s (kustomize-controller re-checks every %s)",
			k.Namespace, k.Name, syncmedic.HumanDuration(now.Sub(since)), KustomizeDependencyRequeue))
	f.Since = since
	f.Evidence = append([]syncmedic.Evidence{{Field: "Ready", Value: kConditionText(k, meta.ReadyCondition), Since: timePtr(ready.LastTransitionTime.Time)}}, ev...)
	f.Remedy = kustomizationReconcileRemedy(k, "Request a reconciliation so kustomize-controller checks the dependencies again (what `flux reconcile kustomization` does); "+
		"if the request is handled and the condition stays, look at kustomize-controller (its logs, whether it runs).")
	return []syncmedic.Finding{f}
}

// KustomizationHealthCheckStuck reports a Kustomization whose Ready condition has said Unknown (reason Progressing,
// "Reconciliation in progress") for longer than spec.timeout plus the threshold: kustomize-controller v1.7.3 ends
// every health check by spec.timeout (Ready=False HealthCheckFailed), so an Unknown that outlives it means no
// controller is finishing the reconciliation. The finding names the health-checked objects that are not ready
// when the source read them.
func KustomizationHealthCheckStuck(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	ready := k.Condition(meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionUnknown || k.Spec.Suspend || !k.DeletionTimestamp.IsZero() {
		return nil
	}
	since := ready.LastTransitionTime.Time
	if now.Sub(since) < k.Timeout()+th.kustomization() {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleKustomizationHealthCheckStuck, kustomizationRef(k),
		fmt.Sprintf("Kustomization %s/%s has been in progress for %s, longer than its timeout %s", k.Namespace, k.Name, syncmedic.HumanDuration(now.Sub(since)), k.Timeout()))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{{Field: "Ready", Value: kConditionText(k, meta.ReadyCondition), Since: timePtr(since)}}
	for _, t := range []string{meta.ReconcilingCondition, meta.HealthyCondition} {
		if c := k.Condition(t); c != nil {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: t, Value: kConditionText(k, t), Since: timePtr(c.LastTransitionTime.Time)})
		}
	}
	f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "spec.timeout", Value: k.Timeout().String()})
	switch {
	case !obs.HealthKnown:
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "health-checked objects", Value: "not read"})
	case len(obs.NotReady) == 0:
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "health-checked objects", Value: "all ready"})
	}
	var held []string
	for _, h := range obs.NotReady {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "not ready " + h.Ref, Value: h.Status})
		held = append(held, h.Ref)
	}
	if len(held) > 0 {
		f.Summary += "; held by " + strings.Join(held, ", ")
	}
	f.Remedy = kustomizationReconcileRemedy(k, "Request a reconciliation so kustomize-controller runs the apply and the health check again, "+
		"bounded by spec.timeout (what `flux reconcile kustomization` does); a request does not abort a running reconciliation. "+
		"An object that never becomes ready must be fixed in its manifests (kubectl describe it).")
	return []syncmedic.Finding{f}
}

// KustomizationDeletionStuck reports a Kustomization deleted longer than the threshold ago that kustomize-controller's
// finalizer still holds. v1.7.3 writes no condition when the finalizer's prune fails, only the Warning event
// "pruning for deleted resource failed" (e.g. an inventory entry whose CRD was removed: "no matches for kind"), so
// the events are the evidence. It notifies only: a reconcile request does not change what the prune does.
func KustomizationDeletionStuck(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	if k.DeletionTimestamp.IsZero() || !k.hasFinalizer() {
		return nil
	}
	since := k.DeletionTimestamp.Time
	if now.Sub(since) < th.kustomization() {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleKustomizationDeletionStuck, kustomizationRef(k),
		fmt.Sprintf("Kustomization %s/%s was deleted %s ago and kustomize-controller's finalizer still holds it", k.Namespace, k.Name, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "metadata.deletionTimestamp", Value: since.UTC().Format(time.RFC3339), Since: timePtr(since)},
		{Field: "metadata.finalizers", Value: strings.Join(k.Finalizers, ", ")},
		{Field: "spec.prune", Value: fmt.Sprint(k.Spec.Prune)},
	}
	pruneFailed := false
	for _, e := range obs.Events {
		if e.Type == "Warning" && strings.Contains(e.Message, PruneFailedMessage) {
			pruneFailed = true
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "event " + e.Reason,
				Value: fmt.Sprintf("%s: %s (%d times)", e.Type, e.Message, e.Count), Since: timePtr(e.Last)})
		}
	}
	if !obs.EventsKnown {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "events", Value: "not read"})
	}
	if pruneFailed {
		f.Summary += ": the prune of its inventory fails"
	}
	f.Remedy = syncmedic.Remedy{
		Description: "Find the inventory entry the prune cannot delete (kustomize-controller's log names it; \"no matches for kind\" means its CRD was removed): " +
			"reinstall that CRD so the prune completes, or, accepting that the applied objects stay, set spec.deletionPolicy: Orphan so the finalizer runs without pruning. " +
			"Never remove the finalizer by hand.",
		Commands: []string{
			fmt.Sprintf("kubectl -n %s get events --field-selector involvedObject.kind=Kustomization,involvedObject.name=%s", k.Namespace, k.Name),
			fmt.Sprintf("kubectl -n %s get kustomization %s -o jsonpath='{.status.inventory.entries[*].id}'", k.Namespace, k.Name),
			fmt.Sprintf(`# only if the objects may stay: kubectl -n %s patch kustomization %s --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`, k.Namespace, k.Name),
		},
	}
	return []syncmedic.Finding{f}
}

// KustomizationStaleRevision reports a Kustomization, not suspended, whose source has served an artifact other than
// status.lastAppliedRevision for longer than spec.interval plus the threshold (kustomize-controller applies a new
// artifact when the source changes, and at least every interval). When the controller already tried that revision
// (lastAttemptedRevision) the apply failed: the finding notifies with Ready's message; otherwise the controller has
// not picked it up, and a reconcile request is the remedy. A Kustomization waiting on a dependency or in progress
// is left to the dependency and health-check rules.
func KustomizationStaleRevision(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	if !obs.SourceKnown || obs.Source.Revision == "" || obs.Source.LastUpdateTime.IsZero() || k.Spec.Suspend || !k.DeletionTimestamp.IsZero() ||
		obs.Source.Revision == k.Status.LastAppliedRevision {
		return nil
	}
	// Waiting on a dependency, or in progress: the dependency and health-check rules judge those.
	if c := k.Condition(meta.ReadyCondition); c != nil && (c.Reason == meta.DependencyNotReadyReason || c.Status == metav1.ConditionUnknown) {
		return nil
	}
	since, ok := staleSince(obs)
	if !ok || now.Sub(since) < k.Spec.Interval.Duration+th.kustomization() {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleKustomizationStaleRevision, kustomizationRef(k),
		fmt.Sprintf("Kustomization %s/%s has not applied %s %s's revision %s, served for %s", k.Namespace, k.Name,
			obs.Source.Kind, k.SourceKey(), obs.Source.Revision, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "source artifact", Value: obs.Source.Revision, Since: timePtr(since)},
		{Field: "status.lastAppliedRevision", Value: orNone(k.Status.LastAppliedRevision)},
		{Field: "status.lastAttemptedRevision", Value: orNone(k.Status.LastAttemptedRevision)},
		{Field: "Ready", Value: kConditionText(k, meta.ReadyCondition)},
		{Field: "spec.interval", Value: k.Spec.Interval.Duration.String()},
	}
	if k.Status.LastAttemptedRevision == obs.Source.Revision {
		if c := k.Condition(meta.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, ImmutableMessage) && !k.Spec.Force {
			return nil // flux/kustomization-immutable-field names the refused field and the ways out
		}
		f.Summary += ": its apply of that revision failed"
		f.Remedy = syncmedic.Remedy{
			Description: "kustomize-controller tried this revision and failed (Ready's message says why): fix the manifests or what they need in the cluster and push a new commit; a reconcile request would only repeat the failure.",
			Commands: []string{fmt.Sprintf("flux get kustomization %s -n %s", k.Name, k.Namespace),
				fmt.Sprintf("flux events --for Kustomization/%s -n %s", k.Name, k.Namespace)},
		}
		return []syncmedic.Finding{f}
	}
	f.Remedy = kustomizationReconcileRemedy(k, "Request a reconciliation so kustomize-controller applies the source's current artifact (what `flux reconcile kustomization` does); "+
		"if the request is handled and the revision does not move, look at kustomize-controller.")
	return []syncmedic.Finding{f}
}

// staleSince is when kustomize-controller could first have applied the source's artifact: the artifact's time, or
// later the Kustomization's creation (a new object starts with nothing applied), or later, while
// status.observedGeneration is behind metadata.generation (a spec not yet run to success: resumed from suspend,
// edited), the time the source first saw that generation; ok is false when that time is unknown (a one-shot scan),
// and then the rule does not judge.
func staleSince(obs KustomizationObservation) (since time.Time, ok bool) {
	k := obs.Kustomization
	since = obs.Source.LastUpdateTime
	if c := k.CreationTimestamp.Time; c.After(since) {
		since = c
	}
	if k.Status.ObservedGeneration < k.Generation {
		if obs.GenerationSeen.IsZero() {
			return time.Time{}, false
		}
		if obs.GenerationSeen.After(since) {
			since = obs.GenerationSeen
		}
	}
	return since, true
}

// KustomizationNextDeadline is the earliest time a Kustomization rule may start to report obs (zero: none pending),
// for the watcher's per-object timer.
func KustomizationNextDeadline(obs KustomizationObservation, now time.Time, th Thresholds) time.Time {
	k := obs.Kustomization
	var at []time.Time
	if c := k.Condition(meta.ReadyCondition); c != nil {
		switch {
		case c.Status == metav1.ConditionUnknown:
			at = append(at, c.LastTransitionTime.Add(k.Timeout()+th.kustomization()))
			if r := obs.Refused; r != nil {
				at = append(at, r.Since.Add(th.kustomization()))
			}
		case c.Status == metav1.ConditionFalse && strings.Contains(c.Message, ImmutableMessage):
			since := c.LastTransitionTime.Time
			if r := obs.Refused; r != nil && r.Since.Before(since) {
				since = r.Since
			}
			at = append(at, since.Add(th.kustomization()))
		case c.Reason == meta.DependencyNotReadyReason:
			since := c.LastTransitionTime.Time
			for _, d := range k.Spec.DependsOn {
				if dep := obs.Dependencies[k.dependencyKey(d)]; dep != nil && dep.IsReady() {
					if t := dep.Condition(meta.ReadyCondition).LastTransitionTime.Time; t.After(since) {
						since = t
					}
				}
			}
			at = append(at, since.Add(KustomizeDependencyRequeue+th.kustomization()))
		}
	}
	if !k.DeletionTimestamp.IsZero() {
		at = append(at, k.DeletionTimestamp.Add(th.kustomization()))
	}
	if obs.SourceKnown && !obs.Source.LastUpdateTime.IsZero() && obs.Source.Revision != k.Status.LastAppliedRevision {
		if since, ok := staleSince(obs); ok {
			at = append(at, since.Add(k.Spec.Interval.Duration+th.kustomization()))
		}
	}
	if !k.Spec.Suspend && k.DeletionTimestamp.IsZero() {
		if t := requestDeadline(k.Annotations, k.Status.LastHandledReconcileAt, k.Timeout(), th); !t.IsZero() {
			at = append(at, t)
		}
	}
	var next time.Time
	for _, t := range at {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// kustomization is the Kustomization threshold, DefaultThresholds' when unset.
func (th Thresholds) kustomization() time.Duration {
	if th.Kustomization > 0 {
		return th.Kustomization
	}
	return DefaultThresholds().Kustomization
}

func kustomizationRef(k *Kustomization) syncmedic.ObjectRef {
	return syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: KustomizationGroup, Version: "v1", Kind: KustomizationKind,
		Namespace: k.Namespace, Name: k.Name, UID: string(k.UID), FluxOwner: fluxOwner(k.Labels),
		Labels: k.Labels, SlackChannel: strings.TrimSpace(k.Annotations[syncmedic.SlackChannelAnnotation])}
}

// kustomizationReconcileRemedy is flux/reconcile-kustomization: the reconcile.fluxcd.io/requestedAt annotation, the
// value `flux reconcile kustomization` writes (the current time, RFC 3339 with nanoseconds).
func kustomizationReconcileRemedy(k *Kustomization, description string) syncmedic.Remedy {
	return syncmedic.Remedy{
		Action: syncmedic.ActionFluxReconcileKustomization, AutoSafe: true, Description: description,
		Commands: []string{
			fmt.Sprintf("flux reconcile kustomization %s -n %s", k.Name, k.Namespace),
			fmt.Sprintf(`# or: kubectl -n %s annotate --overwrite kustomization/%s %s="$(date -u +%%Y-%%m-%%dT%%H:%%M:%%S.%%NZ)"`, k.Namespace, k.Name, meta.ReconcileRequestAnnotation),
		},
		Params: map[string]string{"namespace": k.Namespace, "name": k.Name},
	}
}

func kConditionText(k *Kustomization, t string) string {
	c := k.Condition(t)
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s (reason %s): %s", c.Status, c.Reason, c.Message)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
