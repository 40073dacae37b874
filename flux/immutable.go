package flux

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
)

// ImmutableMessage is what the apiserver answers when an apply changes a field it never lets change (a
// Deployment's or Job's selector, a Service's clusterIP, a Job's template, a PVC's storage class...).
const ImmutableMessage = "field is immutable"

// dryRunFailed matches kustomize-controller's apply error (fluxcd/pkg/ssa): "<Kind>/<namespace>/<name> dry-run
// failed (<Reason>): <the apiserver's message>", the object named first.
var dryRunFailed = regexp.MustCompile(`(\S+) dry-run failed`)

// invalidField matches the apiserver's field error: `... is invalid: spec.selector: Invalid value: ...`.
var invalidField = regexp.MustCompile(`is invalid: (?:\[)?([A-Za-z0-9_.\[\]-]+): (?:Invalid value|Forbidden)`)

// immutableField returns the object and field an apply error names, when it is an immutable-field refusal.
func immutableField(msg string) (object, field string, ok bool) {
	if !strings.Contains(msg, ImmutableMessage) {
		return "", "", false
	}
	if m := dryRunFailed.FindStringSubmatch(msg); m != nil {
		object = m[1]
	}
	if m := invalidField.FindStringSubmatch(msg); m != nil {
		field = m[1]
	}
	return object, field, true
}

// KustomizationImmutableField reports a Kustomization, not suspended nor deleting and without spec.force, whose
// apply of an object has been refused with "field is immutable" for longer than the threshold: kustomize-controller
// retries every spec.retryInterval and fails the same way until the change is reverted or the object recreated
// (spec.force, or the object's kustomize.toolkit.fluxcd.io/force annotation). Each retry marks Ready=Unknown, then
// False again with a new transition time: where the source remembers the refusal (obs.Refused: serve), the clock
// starts at the first refusal of that revision and the finding holds during the retries. Notify only: each way out
// deletes and recreates an object, which is a person's call.
func KustomizationImmutableField(obs KustomizationObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	k := obs.Kustomization
	if k.Spec.Suspend || k.Spec.Force || !k.DeletionTimestamp.IsZero() {
		return nil
	}
	ready := k.Condition(meta.ReadyCondition)
	if ready == nil {
		return nil
	}
	var msg string
	var since time.Time
	retrying := false
	switch r := obs.Refused; {
	case ready.Status == metav1.ConditionFalse && strings.Contains(ready.Message, ImmutableMessage):
		msg, since = ready.Message, ready.LastTransitionTime.Time
		if r != nil && r.Revision == k.Status.LastAttemptedRevision && r.Since.Before(since) {
			since = r.Since // refused on earlier retries too: each retry resets Ready's transition
		}
	case ready.Status == metav1.ConditionUnknown && r != nil && r.Revision == k.Status.LastAttemptedRevision:
		msg, since, retrying = r.Message, r.Since, true // a retry in progress after the refusal
	default:
		return nil
	}
	object, field, ok := immutableField(msg)
	if !ok || now.Sub(since) < th.kustomization() {
		return nil
	}
	what := "an object"
	if object != "" {
		what = object
	}
	if field != "" {
		what += "'s " + field
	}
	f := syncmedic.NewFinding(syncmedic.RuleKustomizationImmutableField, kustomizationRef(k),
		fmt.Sprintf("Kustomization %s/%s cannot apply %s: the field is immutable, and kustomize-controller fails the same way every retry (%s)",
			k.Namespace, k.Name, what, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "Ready", Value: kConditionText(k, meta.ReadyCondition), Since: timePtr(ready.LastTransitionTime.Time)},
		{Field: "spec.force", Value: "false"},
		{Field: "status.lastAttemptedRevision", Value: orNone(k.Status.LastAttemptedRevision)},
		{Field: "status.lastAppliedRevision", Value: orNone(k.Status.LastAppliedRevision)},
	}
	if retrying {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "last refusal (a retry is in progress)", Value: msg, Since: timePtr(since)})
	}
	target := "the object"
	if object != "" {
		target = object
	}
	f.Remedy = syncmedic.Remedy{
		Description: fmt.Sprintf("The apiserver refuses to change %s in place. Ways out, by cost: revert the change in git (nothing is recreated); "+
			"or add the annotation kustomize.toolkit.fluxcd.io/force: enabled to %s in git, so kustomize-controller deletes and recreates only it "+
			"(a Deployment's Pods are replaced at once, a Job runs again, a PersistentVolumeClaim's data may be lost with it); "+
			"or set spec.force: true on the Kustomization, which recreates every object with an immutable change, now and on every later apply; "+
			"or delete %s yourself and let the next reconcile create it.", what, target, target),
		Commands: []string{
			fmt.Sprintf("flux get kustomization %s -n %s", k.Name, k.Namespace),
			fmt.Sprintf("flux events --for Kustomization/%s -n %s", k.Name, k.Namespace),
			fmt.Sprintf("flux diff kustomization %s -n %s --path <the repository's path>   # the change the apiserver refuses", k.Name, k.Namespace),
		},
	}
	return []syncmedic.Finding{f}
}
