package flux

import (
	"fmt"
	"slices"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

// RetriesExceededReason is the Stalled reason helm-controller (v1.x, internal/reconcile) sets when install or
// upgrade retries are exhausted; the API module does not export it.
const RetriesExceededReason = "RetriesExceeded"

// CRDName is the HelmRelease CustomResourceDefinition.
const CRDName = "helmreleases.helm.toolkit.fluxcd.io"

// EvaluateRelease runs every HelmRelease rule of the catalog against one observation.
func EvaluateRelease(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	if obs.Release == nil {
		return nil
	}
	var out []syncmedic.Finding
	out = append(out, StaleStatus(obs, now, th)...)
	out = append(out, DependencyNotReadyFalse(obs, now, th)...)
	out = append(out, RetriesExhausted(obs, now, th)...)
	out = append(out, ReleaseDeletionStuck(obs, now, th)...)
	out = append(out, ReadyUnknownStuck(obs, now, th)...)
	out = append(out, ReleaseRequestNotHandled(obs, now, th)...)
	return out
}

// ReleaseDeletionStuck reports a HelmRelease deleted longer than the threshold ago that helm-controller's finalizer
// (finalizers.fluxcd.io) still holds (helm-controller #554), and says why: the uninstall fails (its Ready condition
// says so after the deletion), or no helm-controller has touched it since it was deleted (not running, or not
// watching this namespace). A suspended release is deleted without an uninstall by helm-controller v1.x, so a
// suspended one that stays points at the controller too.
func ReleaseDeletionStuck(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	dt := hr.DeletionTimestamp
	if dt == nil || !slices.Contains(hr.Finalizers, helmv2.HelmReleaseFinalizer) || now.Sub(dt.Time) < th.ReleaseDeletion {
		return nil
	}
	since := dt.Time
	ready := condition(hr, meta.ReadyCondition)
	var why string
	switch {
	case ready != nil && ready.Status == "False" && !ready.LastTransitionTime.Time.Before(dt.Time):
		why = fmt.Sprintf("the uninstall fails (%s: %s)", ready.Reason, ready.Message)
	case hr.Spec.Suspend:
		why = "it is suspended, which helm-controller v1.x deletes without an uninstall: no helm-controller is handling it"
	default:
		why = "no helm-controller has updated it since it was deleted: is helm-controller running, and watching this namespace?"
	}
	f := syncmedic.NewFinding(syncmedic.RuleReleaseDeletionStuck, releaseRef(hr),
		fmt.Sprintf("HelmRelease %s/%s has been deleting for %s: %s", hr.Namespace, hr.Name, syncmedic.HumanDuration(now.Sub(since)), why))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "metadata.deletionTimestamp", Value: dt.UTC().Format(time.RFC3339), Since: timePtr(since)},
		{Field: "metadata.finalizers", Value: "[" + strings.Join(hr.Finalizers, ", ") + "]"},
		{Field: "spec.suspend", Value: fmt.Sprint(hr.Spec.Suspend)},
	}
	if ready != nil {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "Ready", Value: conditionText(hr, meta.ReadyCondition), Since: timePtr(ready.LastTransitionTime.Time)})
	}
	if hr.Status.StorageNamespace != "" {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "Helm release", Value: hr.Status.StorageNamespace + "/" + hr.GetReleaseName()})
	}
	f.Remedy = syncmedic.Remedy{
		Description: "Let helm-controller finish: make sure it runs (and can reach the target cluster), fix what makes the uninstall fail (the Ready message), then ask it to try again. Removing the finalizer by hand leaves the Helm release installed and unmanaged.",
		Commands: []string{
			"kubectl -n flux-system get deployment helm-controller   # is it running?",
			fmt.Sprintf("kubectl -n flux-system logs deployment/helm-controller | grep '%s/%s'", hr.Namespace, hr.Name),
			fmt.Sprintf("flux reconcile helmrelease %s -n %s   # ask for another uninstall attempt", hr.Name, hr.Namespace),
			fmt.Sprintf(`# last resort, leaves the Helm release installed: kubectl -n %s patch helmrelease %s --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`, hr.Namespace, hr.Name),
		},
	}
	f.Advisories = controllerAdvisories(obs.ControllerVersion)
	return []syncmedic.Finding{f}
}

// oldReadyMessages are the Ready messages helm-controller wrote before v2beta2 (Flux < 2.2); v2beta2+ controllers
// write "Helm upgrade succeeded for release ns/name.vN with chart name@version".
var oldReadyMessages = map[string]bool{
	"Helm install succeeded": true, "Helm upgrade succeeded": true, "Helm rollback succeeded": true,
	"Helm test succeeded": true, "Release reconciliation succeeded": true,
}

// StaleStatus reports a HelmRelease whose status was written by a pre-v2beta2 controller (old-format Ready message,
// no status.history) and whose observedGeneration has stayed behind its generation past the threshold.
func StaleStatus(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	if len(hr.Status.History) > 0 || hr.Status.ObservedGeneration >= hr.Generation {
		return nil
	}
	msg := conditionMessage(hr, meta.ReadyCondition)
	if !oldReadyMessages[strings.TrimSpace(msg)] {
		return nil
	}
	since := readySince(hr)
	if now.Sub(since) < th.StaleStatus {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleHelmReleaseStaleStatus, releaseRef(hr),
		fmt.Sprintf("HelmRelease %s/%s still shows the status an old helm-controller wrote (%q); generation %d was never observed", hr.Namespace, hr.Name, msg, hr.Generation))
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "Ready", Value: conditionText(hr, meta.ReadyCondition), Since: timePtr(since)},
		{Field: "metadata.generation", Value: fmt.Sprint(hr.Generation)},
		{Field: "status.observedGeneration", Value: fmt.Sprint(hr.Status.ObservedGeneration)},
		{Field: "status.history", Value: "empty (written before v2beta2)"},
	}
	if hr.Status.LastAttemptedRevision != "" {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.lastAttemptedRevision", Value: hr.Status.LastAttemptedRevision})
	}
	f.Remedy = reconcileRemedy(hr, "Request a reconciliation; if helm-controller handles it, the status is still stale and the install or upgrade itself failed, force one (what `flux reconcile hr --force` does) so the current controller rewrites the status.")
	f.Advisories = controllerAdvisories(obs.ControllerVersion)
	return []syncmedic.Finding{f}
}

// DependencyNotReadyFalse reports a HelmRelease that is Ready=False with reason DependencyNotReady while every
// spec.dependsOn HelmRelease is Ready=True at its current generation (helm-controller #946), for longer than the
// threshold counted from the moment the last dependency became Ready (not from the dependent's own transition: a
// bootstrap chain turns Ready link by link, and helm-controller re-checks a dependent only every
// --requeue-dependency, 30 s by default). It stays silent when a dependency is missing from the observation or
// really is not ready, when the dependent is suspended (helm-controller does not reconcile it, so it cannot update
// the condition), and when a dependency has a readyExpr (API ≥ v1.4), which replaces the built-in check.
func DependencyNotReadyFalse(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	ready := condition(hr, meta.ReadyCondition)
	if ready == nil || ready.Status != "False" || ready.Reason != meta.DependencyNotReadyReason || !obs.DependenciesKnown ||
		len(hr.Spec.DependsOn) == 0 || hr.Spec.Suspend || len(obs.ReadyExprs) > 0 {
		return nil
	}
	since := ready.LastTransitionTime.Time
	var ev []syncmedic.Evidence
	for _, d := range hr.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = hr.Namespace
		}
		dep, ok := obs.Dependencies[types.NamespacedName{Namespace: ns, Name: d.Name}]
		if !ok || dep == nil || !isReady(dep) || dep.Status.ObservedGeneration != dep.Generation {
			return nil
		}
		depReady := readySince(dep)
		if depReady.After(since) {
			since = depReady
		}
		ev = append(ev, syncmedic.Evidence{Field: "dependency " + ns + "/" + d.Name,
			Value: fmt.Sprintf("Ready=True since %s, observedGeneration %d = generation %d", depReady.UTC().Format(time.RFC3339), dep.Status.ObservedGeneration, dep.Generation),
			Since: timePtr(depReady)})
	}
	if now.Sub(since) < th.DependencyNotReady {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleDependencyNotReadyFalse, releaseRef(hr),
		fmt.Sprintf("HelmRelease %s/%s says a dependency is not ready, but every dependency has been Ready for %s", hr.Namespace, hr.Name, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = append([]syncmedic.Evidence{{Field: "Ready", Value: conditionText(hr, meta.ReadyCondition), Since: timePtr(ready.LastTransitionTime.Time)}}, ev...)
	// Only a plain request: --force upgrades the release, it does not change how dependencies are checked.
	f.Remedy = syncmedic.Remedy{
		Action: syncmedic.ActionFluxReconcile, AutoSafe: true,
		Description: "Request a reconciliation so helm-controller checks the dependencies again (what `flux reconcile hr` does). " +
			"A forced reconcile would not help a dependency check; if the request is handled and the condition stays, look at the controller.",
		Commands: []string{fmt.Sprintf("flux reconcile helmrelease %s -n %s", hr.Name, hr.Namespace),
			fmt.Sprintf(`# or: kubectl -n %s annotate --overwrite helmrelease/%s %s="$(date -u +%%Y-%%m-%%dT%%H:%%M:%%S.%%NZ)"`, hr.Namespace, hr.Name, meta.ReconcileRequestAnnotation)},
		Params: map[string]string{"namespace": hr.Namespace, "name": hr.Name, ParamEscalate: "false"},
	}
	f.Advisories = controllerAdvisories(obs.ControllerVersion)
	return []syncmedic.Finding{f}
}

// ParamEscalate is the remedy parameter that, set to "false", keeps flux/reconcile from escalating a handled plain
// request to a forced one.
const ParamEscalate = "escalate"

// RetriesExhausted reports a HelmRelease that is Stalled because install or upgrade retries are exhausted.
func RetriesExhausted(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	stalled := condition(hr, meta.StalledCondition)
	ready := condition(hr, meta.ReadyCondition)
	match := stalled != nil && stalled.Status == "True" && (stalled.Reason == RetriesExceededReason || strings.Contains(stalled.Message, "retries exhausted"))
	if !match && ready != nil && ready.Status == "False" && strings.Contains(ready.Message, "retries exhausted") {
		match = true
	}
	if !match {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, releaseRef(hr),
		fmt.Sprintf("HelmRelease %s/%s gave up: retries are exhausted and helm-controller will not try again until reset", hr.Namespace, hr.Name))
	if stalled != nil {
		f.Since = stalled.LastTransitionTime.Time
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "Stalled", Value: conditionText(hr, meta.StalledCondition), Since: timePtr(f.Since)})
	}
	if ready != nil {
		if f.Since.IsZero() { // a v2beta1-era release: no Stalled condition, the Ready transition dates it
			f.Since = ready.LastTransitionTime.Time
		}
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "Ready", Value: conditionText(hr, meta.ReadyCondition), Since: timePtr(ready.LastTransitionTime.Time)})
	}
	f.Evidence = append(f.Evidence,
		syncmedic.Evidence{Field: "status.installFailures", Value: fmt.Sprint(hr.Status.InstallFailures)},
		syncmedic.Evidence{Field: "status.upgradeFailures", Value: fmt.Sprint(hr.Status.UpgradeFailures)})
	f.Remedy = syncmedic.Remedy{
		Action: syncmedic.ActionFluxResetReconcile, AutoSafe: false,
		Description: "Fix the cause of the failed install/upgrade first (see the Ready message), then reset the failure counters and reconcile, like `flux reconcile hr --reset`.",
		Commands: []string{
			fmt.Sprintf("flux reconcile helmrelease %s -n %s --reset", hr.Name, hr.Namespace),
			fmt.Sprintf(`# or: t="$(date -u +%%Y-%%m-%%dT%%H:%%M:%%S.%%NZ)"; kubectl -n %s annotate --overwrite helmrelease/%s %s="$t" %s="$t"`, hr.Namespace, hr.Name, meta.ReconcileRequestAnnotation, helmv2.ResetRequestAnnotation),
		},
	}
	return []syncmedic.Finding{f}
}

// deprecatedVersions are HelmRelease API versions Flux removes (v2beta1 in Flux 2.7) or deprecates (v2beta2).
var deprecatedVersions = map[string]bool{"v2beta1": true, "v2beta2": true}

// EvaluateCRD runs the CRD storage rule (flux/deprecated-stored-version).
func EvaluateCRD(obs CRDObservation, now time.Time) []syncmedic.Finding {
	var old []string
	for _, v := range obs.StoredVersions {
		if deprecatedVersions[v] {
			old = append(old, v)
		}
	}
	if len(old) == 0 {
		return nil
	}
	name := obs.Name
	if name == "" {
		name = CRDName
	}
	ref := syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: name}
	f := syncmedic.NewFinding(syncmedic.RuleDeprecatedStoredVersion, ref,
		fmt.Sprintf("CRD %s still stores HelmReleases as %s: upgrading to Flux 2.7, which removes v2beta1, fails until they are migrated", name, strings.Join(old, ", ")))
	f.Evidence = []syncmedic.Evidence{{Field: "status.storedVersions", Value: "[" + strings.Join(obs.StoredVersions, ", ") + "]"}}
	if obs.Storage != "" {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "storage version", Value: obs.Storage})
	}
	f.Remedy = syncmedic.Remedy{
		Description: "Rewrite every HelmRelease in the storage version and drop the old versions from status.storedVersions with `flux migrate` (flux CLI ≥ 2.7.0) before upgrading Flux to 2.7.",
		Commands:    []string{"flux migrate", "kubectl get crd " + name + " -o jsonpath='{.status.storedVersions}'"},
	}
	f.Advisories = []string{"v2beta2 storage came with Flux 2.2.0 (helm-controller v0.37.0) and v2 with Flux 2.3.0; Flux 2.7.0 removes v2beta1."}
	return []syncmedic.Finding{f}
}

func releaseRef(hr *helmv2.HelmRelease) syncmedic.ObjectRef {
	return syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: helmv2.GroupVersion.Group, Version: helmv2.GroupVersion.Version, Kind: helmv2.HelmReleaseKind,
		Namespace: hr.Namespace, Name: hr.Name, UID: string(hr.UID), FluxOwner: fluxOwner(hr.Labels),
		Labels: hr.Labels, SlackChannel: strings.TrimSpace(hr.Annotations[syncmedic.SlackChannelAnnotation])}
}

// fluxOwner names the Kustomization that applied an object, from kustomize-controller's labels.
func fluxOwner(labels map[string]string) string {
	if n := labels["kustomize.toolkit.fluxcd.io/name"]; n != "" {
		return "Kustomization/" + labels["kustomize.toolkit.fluxcd.io/namespace"] + "/" + n
	}
	return ""
}

func reconcileRemedy(hr *helmv2.HelmRelease, description string) syncmedic.Remedy {
	return syncmedic.Remedy{
		Action: syncmedic.ActionFluxReconcile, AutoSafe: true, Description: description,
		Commands: []string{
			fmt.Sprintf("flux reconcile helmrelease %s -n %s", hr.Name, hr.Namespace),
			fmt.Sprintf("flux reconcile helmrelease %s -n %s --force   # only if the plain request was handled and the install or upgrade itself failed (Released=False)", hr.Name, hr.Namespace),
		},
		Params: map[string]string{"namespace": hr.Namespace, "name": hr.Name},
	}
}

func readySince(hr *helmv2.HelmRelease) time.Time {
	if t := conditionTransition(hr, meta.ReadyCondition); t != nil {
		return t.Time
	}
	return hr.CreationTimestamp.Time
}

func conditionText(hr *helmv2.HelmRelease, t string) string {
	c := condition(hr, t)
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s (reason %s): %s", c.Status, c.Reason, c.Message)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
