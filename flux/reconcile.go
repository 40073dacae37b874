package flux

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
)

// ReconcileRequester applies the flux/* remedies: it writes reconcile requests on a HelmRelease exactly as
// `flux reconcile hr [--force|--reset]` does (a merge patch of annotations, valued time.Now().Format(time.RFC3339Nano)),
// escalates a handled but unsuccessful plain request to a forced one only when the status shows that the install or
// upgrade itself failed (releaseStepNotFailed), and never writes a new request while the
// previous one is unhandled (status.lastHandledReconcileAt differs from it).
type ReconcileRequester struct {
	// Client reads and patches HelmReleases; its scheme must know helm-controller's v2 types.
	Client client.Client
	// Now is the clock for the request token; nil means time.Now.
	Now func() time.Time
}

var _ syncmedic.Remedier = (*ReconcileRequester)(nil)

// NewReconcileRequester returns a ReconcileRequester using c.
func NewReconcileRequester(c client.Client) *ReconcileRequester {
	return &ReconcileRequester{Client: c}
}

// Remediers maps the three flux actions to r.
func (r *ReconcileRequester) Remediers() syncmedic.Remediers {
	return syncmedic.Remediers{
		syncmedic.ActionFluxReconcile:      r,
		syncmedic.ActionFluxForceReconcile: r,
		syncmedic.ActionFluxResetReconcile: r,
	}
}

// request is what a remediation decides to write.
type request int

const (
	requestNone request = iota
	requestPlain
	requestForce
	requestReset
)

func (q request) action() syncmedic.ActionID {
	switch q {
	case requestForce:
		return syncmedic.ActionFluxForceReconcile
	case requestReset:
		return syncmedic.ActionFluxResetReconcile
	default:
		return syncmedic.ActionFluxReconcile
	}
}

// ErrRequestUnsuccessful is returned (wrapped in syncmedic.Permanent) when the strongest request for the action
// was already handled after the condition started and the condition still holds: a person must look.
var ErrRequestUnsuccessful = errors.New("the last reconcile request was handled and the release is still stuck")

// decide picks the request to write for action on hr, given when the condition began (since) — or requestNone with
// the reason. It is pure: the rules of escalation and idempotence live here.
// With escalate false, a handled plain request is not followed by a forced one (flux/dependency-not-ready-false:
// --force does not change how dependencies are checked).
func decide(hr *helmv2.HelmRelease, action syncmedic.ActionID, since time.Time, escalate bool) (request, string, error) {
	ann := hr.GetAnnotations()
	req := ann[meta.ReconcileRequestAnnotation]
	handled := hr.Status.LastHandledReconcileAt
	if req != "" && req != handled {
		return requestNone, fmt.Sprintf("reconcile request %s is not handled yet (status.lastHandledReconcileAt %q); not writing another", req, handled), nil
	}
	// A handled request counts against this condition only when it was made after the condition began.
	answered := req != "" && requestAfter(req, since)
	switch action {
	case syncmedic.ActionFluxResetReconcile:
		if answered && ann[helmv2.ResetRequestAnnotation] == req {
			return requestNone, "", fmt.Errorf("%w: reset %s was handled; fix the cause of the failed release (see its Ready message)", ErrRequestUnsuccessful, req)
		}
		return requestReset, "", nil
	case syncmedic.ActionFluxForceReconcile:
		if answered && ann[helmv2.ForceRequestAnnotation] == req {
			return requestNone, "", fmt.Errorf("%w: forced reconcile %s was handled", ErrRequestUnsuccessful, req)
		}
		return requestForce, "", nil
	case syncmedic.ActionFluxReconcile:
		if !answered {
			return requestPlain, "", nil
		}
		if ann[helmv2.ForceRequestAnnotation] == req {
			return requestNone, "", fmt.Errorf("%w: forced reconcile %s was handled", ErrRequestUnsuccessful, req)
		}
		if !escalate {
			return requestNone, "", fmt.Errorf("%w: reconcile %s was handled; this rule asks only a plain reconcile, never a forced one (it would not change a dependency check, nor finish an action no helm-controller runs)", ErrRequestUnsuccessful, req)
		}
		if why := releaseStepNotFailed(hr); why != "" {
			return requestNone, "", fmt.Errorf("%w: reconcile %s was handled and the status is still stale, but %s. "+
				"A forced reconcile cannot fix a failure before the release step (HelmChart template, source, values, "+
				"access or apply errors), and once that is fixed it would force an upgrade of a release that may be in sync: "+
				"look at helm-controller's events and logs for this release (Ready: %s)",
				ErrRequestUnsuccessful, req, why, conditionText(hr, meta.ReadyCondition))
		}
		return requestForce, "", nil
	default:
		return requestNone, "", fmt.Errorf("action %q is not a flux reconcile action", action)
	}
}

// releaseStepNotFailed says why hr's status does not show that the install or upgrade itself failed for its current
// generation, or "" when it does: the only failure a forced reconcile can help with. helm-controller (v0.37.2 and
// v1.4.3, internal/controller reconcileRelease) writes status.lastAttemptedGeneration only once the HelmChart
// template, the source, the values and the chart are done, just before the release step; the release step
// (internal/reconcile install.go, upgrade.go) records status.lastAttemptedReleaseAction — a field no pre-v2beta2
// controller wrote — and marks Released=False with reason InstallFailed or UpgradeFailed when the action fails. The
// steps before it fail without touching Released (the HelmChart template's errors leave every condition as it
// was). With the retries exhausted (Stalled=True), forcing would install or upgrade past them: that is
// flux/retries-exhausted's reset, for a person.
func releaseStepNotFailed(hr *helmv2.HelmRelease) string {
	released := condition(hr, helmv2.ReleasedCondition)
	switch {
	case hr.Status.LastAttemptedGeneration != hr.Generation:
		return fmt.Sprintf("helm-controller stopped before the release step (status.lastAttemptedGeneration %d, generation %d)", hr.Status.LastAttemptedGeneration, hr.Generation)
	case hr.Status.LastAttemptedReleaseAction == "":
		return "no install or upgrade was attempted (status.lastAttemptedReleaseAction is empty)"
	case released == nil || released.Status != metav1.ConditionFalse ||
		(released.Reason != helmv2.InstallFailedReason && released.Reason != helmv2.UpgradeFailedReason):
		return "the release step did not fail (Released: " + conditionText(hr, helmv2.ReleasedCondition) + ")"
	case apimeta.IsStatusConditionTrue(hr.Status.Conditions, meta.StalledCondition):
		return "its retries are exhausted (Stalled: " + conditionText(hr, meta.StalledCondition) + "); forcing would retry past them: see flux/retries-exhausted"
	}
	return ""
}

// requestAfter reports whether the request token (RFC3339Nano, as the flux CLI writes it) is not before since. A
// token that is not a timestamp is treated as older, so the plain request comes first.
func requestAfter(token string, since time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, token)
	if err != nil {
		return false
	}
	return since.IsZero() || !t.Before(since)
}

// Remediate implements syncmedic.Remedier.
func (r *ReconcileRequester) Remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: f.Remedy.Action, DryRun: dryRun}
	key := releaseKey(f)
	if key.Name == "" || key.Namespace == "" {
		return out, syncmedic.Permanent(fmt.Errorf("finding %s names no HelmRelease", f.Fingerprint))
	}
	hr := &helmv2.HelmRelease{}
	if err := r.Client.Get(ctx, key, hr); err != nil {
		if apierrors.IsNotFound(err) {
			out.Steps = append(out.Steps, fmt.Sprintf("HelmRelease %s is gone; nothing to do", key))
			return out, nil
		}
		return out, fmt.Errorf("reading HelmRelease %s: %w", key, err)
	}
	if why := stillStuck(hr, f.Rule); why != "" {
		out.Steps = append(out.Steps, fmt.Sprintf("HelmRelease %s %s; nothing to do", key, why))
		return out, nil
	}
	q, reason, err := decide(hr, f.Remedy.Action, f.Since, f.Remedy.Params[ParamEscalate] != "false")
	if err != nil {
		return out, syncmedic.Permanent(err)
	}
	if q == requestNone {
		out.Steps = append(out.Steps, reason)
		return out, nil
	}
	out.Action = q.action()
	ts := r.now().Format(time.RFC3339Nano)
	patch := client.MergeFrom(hr.DeepCopy())
	ann := hr.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[meta.ReconcileRequestAnnotation] = ts
	switch q {
	case requestForce:
		ann[helmv2.ForceRequestAnnotation] = ts
	case requestReset:
		ann[helmv2.ResetRequestAnnotation] = ts
	}
	hr.SetAnnotations(ann)
	data, err := patch.Data(hr)
	if err != nil {
		return out, fmt.Errorf("building the patch: %w", err)
	}
	step := fmt.Sprintf("PATCH helmreleases.%s %s (merge patch): %s", helmv2.GroupVersion.Group, key, data)
	if dryRun {
		out.Steps = append(out.Steps, "would "+step)
		return out, nil
	}
	if err := syncmedic.BeforeWrite(ctx, step); err != nil {
		return out, err
	}
	if err := r.Client.Patch(ctx, hr, patch); err != nil {
		switch {
		case apierrors.IsForbidden(err):
			err = syncmedic.Permanent(fmt.Errorf("patching HelmRelease %s: syncmedic's account needs `patch` on helmreleases.%s (manifests/base/clusterrole.yaml): %w", key, helmv2.GroupVersion.Group, err))
		case apierrors.IsInvalid(err):
			err = syncmedic.Permanent(fmt.Errorf("patching HelmRelease %s: %w", key, err))
		default:
			err = fmt.Errorf("patching HelmRelease %s: %w", key, err)
		}
		return out, err
	}
	out.Changed = true
	out.Steps = append(out.Steps, step)
	return out, nil
}

// stillStuck re-checks, on the freshly read object, the condition the finding's rule reported; it returns why
// nothing should be done, or "" when the condition still holds.
func stillStuck(hr *helmv2.HelmRelease, rule syncmedic.RuleID) string {
	switch rule {
	case syncmedic.RuleHelmReleaseStaleStatus:
		if len(StaleStatus(ReleaseObservation{Release: hr}, time.Now(), Thresholds{})) == 0 {
			return "no longer has a stale status"
		}
	case syncmedic.RuleDependencyNotReadyFalse:
		c := condition(hr, meta.ReadyCondition)
		if c == nil || c.Status != "False" || c.Reason != meta.DependencyNotReadyReason {
			return "is no longer waiting for a dependency"
		}
	case syncmedic.RuleReadyUnknownStuck:
		if c := condition(hr, meta.ReadyCondition); c == nil || c.Status != "Unknown" {
			return "is no longer in progress"
		}
	case syncmedic.RuleRetriesExhausted:
		if len(RetriesExhausted(ReleaseObservation{Release: hr}, time.Now(), Thresholds{})) == 0 {
			return "is no longer stalled with retries exhausted"
		}
	}
	return ""
}

func releaseKey(f syncmedic.Finding) types.NamespacedName {
	ns, name := f.Remedy.Params["namespace"], f.Remedy.Params["name"]
	if ns == "" || name == "" {
		ns, name = f.Object.Namespace, f.Object.Name
	}
	return types.NamespacedName{Namespace: ns, Name: name}
}

func (r *ReconcileRequester) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
