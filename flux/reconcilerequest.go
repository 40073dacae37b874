package flux

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"

	"github.com/syncmedic/syncmedic"
)

// ShardLabel is the label Flux's controller sharding selects objects by: a controller started with
// --watch-label-selector 'sharding.fluxcd.io/key in (<shard>)' handles only the objects labelled with its shard,
// the main one ('!sharding.fluxcd.io/key') only those without the label.
const ShardLabel = "sharding.fluxcd.io/key"

// pendingRequest is a reconcile request (reconcile.fluxcd.io/requestedAt) its controller has not handled
// (status.lastHandledReconcileAt differs), with when it was made.
type pendingRequest struct {
	value, handled string
	at             time.Time
}

// unhandledRequest returns the object's pending request, or false when there is none, when it is handled, or when
// its value is not a time (RFC 3339, as `flux reconcile` and syncmedic write it, or Unix seconds, as `date +%s`
// does): such a request cannot be dated, and is not judged.
func unhandledRequest(annotations map[string]string, handled string) (pendingRequest, bool) {
	v, ok := meta.ReconcileAnnotationValue(annotations)
	if !ok || v == "" || v == handled {
		return pendingRequest{}, false
	}
	at, ok := requestTime(v)
	if !ok {
		return pendingRequest{}, false
	}
	return pendingRequest{value: v, handled: handled, at: at}, true
}

func requestTime(v string) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return time.Unix(n, 0).UTC(), true
	}
	return time.Time{}, false
}

// releaseRequestBudget is how long helm-controller may take to handle a request on hr: it marks the request handled
// when the reconcile ends, and one reconcile runs an action and, when it fails, its remediation (a rollback or an
// uninstall), each bounded by the action's timeout.
func releaseRequestBudget(hr *helmv2.HelmRelease) time.Duration {
	return 2 * releaseActionTimeout(hr, "")
}

// reconcileRequest is the threshold of flux/reconcile-request-not-handled, DefaultThresholds' when unset.
func (th Thresholds) reconcileRequest() time.Duration {
	if th.ReconcileRequest > 0 {
		return th.ReconcileRequest
	}
	return DefaultThresholds().ReconcileRequest
}

// ReleaseRequestNotHandled reports a HelmRelease, not suspended nor deleting, whose reconcile request has not been
// handled for longer than twice its action timeout plus the threshold: helm-controller records the request as
// handled when any reconcile of the object ends (v0.37 and v1.x, in the deferred status patch), so a request that
// stays unhandled means no helm-controller is reconciling the object (not running, its queue stalled, or a shard
// label no controller selects).
func ReleaseRequestNotHandled(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	if hr.Spec.Suspend || hr.DeletionTimestamp != nil {
		return nil
	}
	req, ok := unhandledRequest(hr.Annotations, hr.Status.LastHandledReconcileAt)
	if !ok {
		return nil
	}
	budget := releaseRequestBudget(hr)
	if now.Sub(req.at) < budget+th.reconcileRequest() {
		return nil
	}
	return []syncmedic.Finding{requestFinding(releaseRef(hr), "HelmRelease", "helmrelease", "helm-controller", hr.Labels, req, now,
		fmt.Sprintf("twice the action timeout (%s: an action and its remediation)", budget), conditionText(hr, meta.ReadyCondition))}
}

// KustomizationRequestNotHandled reports a Kustomization, not suspended nor deleting, whose reconcile request has
// not been handled for longer than its timeout plus the threshold: kustomize-controller v1.7.3 records the request
// as handled when any reconcile of the object ends (finalizeStatus), and ends every reconcile by spec.timeout.
func KustomizationRequestNotHandled(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	if k.Spec.Suspend || !k.DeletionTimestamp.IsZero() {
		return nil
	}
	req, ok := unhandledRequest(k.Annotations, k.Status.LastHandledReconcileAt)
	if !ok {
		return nil
	}
	if now.Sub(req.at) < k.Timeout()+th.reconcileRequest() {
		return nil
	}
	return []syncmedic.Finding{requestFinding(kustomizationRef(k), KustomizationKind, "kustomization", "kustomize-controller", k.Labels, req, now,
		fmt.Sprintf("its timeout (%s)", k.Timeout()), kConditionText(k, meta.ReadyCondition))}
}

// requestDeadline is when a rule of this file may first report a request made at, with budget.
func requestDeadline(annotations map[string]string, handled string, budget time.Duration, th Thresholds) time.Time {
	req, ok := unhandledRequest(annotations, handled)
	if !ok {
		return time.Time{}
	}
	return req.at.Add(budget + th.reconcileRequest())
}

func requestFinding(ref syncmedic.ObjectRef, kind, cliKind, controller string, labels map[string]string, req pendingRequest, now time.Time, bound, ready string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleReconcileRequestNotHandled, ref,
		fmt.Sprintf("%s %s/%s: the reconcile request made %s ago has not been handled; %s handles a request when a reconcile ends, within %s: no %s is reconciling it",
			kind, ref.Namespace, ref.Name, syncmedic.HumanDuration(now.Sub(req.at)), controller, bound, controller))
	f.Since = req.at
	handled := req.handled
	if handled == "" {
		handled = "(none)"
	}
	f.Evidence = []syncmedic.Evidence{
		{Field: "metadata.annotations[" + meta.ReconcileRequestAnnotation + "]", Value: req.value, Since: timePtr(req.at)},
		{Field: "status.lastHandledReconcileAt", Value: handled},
		{Field: "Ready", Value: ready},
	}
	selector := "'!" + ShardLabel + "' (the main controller) or no --watch-label-selector"
	if shard, ok := labels[ShardLabel]; ok {
		selector = fmt.Sprintf("'%s in (%s)'", ShardLabel, shard)
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "metadata.labels[" + ShardLabel + "]",
			Value: fmt.Sprintf("%s: only a %s started with --watch-label-selector %s handles it", shard, controller, selector)})
	}
	f.Remedy = syncmedic.Remedy{
		Description: fmt.Sprintf("Find why no %s reconciles this object: is it running and not restarting, does its log show this object, and does one run with --watch-label-selector %s "+
			"and, if it watches selected namespaces only, this namespace? Once one does, it handles the request by itself; no write to the object is needed.", controller, selector),
		Commands: []string{
			fmt.Sprintf("kubectl -n flux-system get pods -l app=%s -o wide", controller),
			fmt.Sprintf("kubectl -n flux-system logs deploy/%s --since=1h | grep '\"name\":\"%s\"' | tail", controller, ref.Name),
			`kubectl -n flux-system get deploy -o custom-columns=NAME:.metadata.name,ARGS:.spec.template.spec.containers[0].args`,
			fmt.Sprintf("flux get %s %s -n %s", cliKind+"s", ref.Name, ref.Namespace),
		},
	}
	return f
}
