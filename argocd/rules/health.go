package rules

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// WaitingForHealth reports an operation Running on "waiting for healthy state of <group>/<Kind>/<name>" past the
// threshold while that resource is not Healthy (argo-cd #17314). gitops-engine writes the message when a wave of
// resources (not hooks) is applied and a later wave or phase waits for it (setRunningPhase: the v2.14.21 engine's
// sync_context.go:372-389, v3.6.1's 440-489); it moves on only once the resource is Healthy, and fails the operation
// when it is Degraded, so a resource that stays Progressing, Suspended, Missing or Unknown holds the operation — and
// every new sync, which argocd-server refuses while it runs — forever.
//
// The resource's health is read from the application's status.resources: v2.14.21 persists it there, and v3's
// argocd-server fills it in from the resource tree for Get and Watch (inferResourcesStatusHealth) though the
// controller no longer persists it. Nothing is reported when the health is unknown (argocd/operation-stuck remains),
// when the resource is Healthy (the controller moves on at its next pass), or while the controller has set the
// operation aside (a sync window or a retry backoff: OperationPause).
func WaitingForHealth(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || op.Phase != synccommon.OperationRunning || OperationPause(op) != NotPaused {
		return nil
	}
	how, ref, ok := parseWaiting(op.Message)
	if !ok || how != waitHealthy {
		return nil
	}
	res := waitedResource(obs, ref)
	if res == nil || res.Health == nil || res.Health.Status == "" || res.Health.Status == health.HealthStatusHealthy {
		return nil
	}
	since := op.StartedAt.Time
	if obs.StateSince.After(since) {
		since = obs.StateSince
	}
	if now.Sub(since) < th.WaitingForHealth {
		return nil
	}
	name := resourceLabel(res)
	state := string(res.Health.Status)
	if res.Health.Message != "" {
		state += ": " + res.Health.Message
	}
	f := syncmedic.NewFinding(syncmedic.RuleWaitingForHealth, appObjectRef(obs),
		fmt.Sprintf("Sync of %s has waited %s for %s to become healthy; it is %s", appName(obs), syncmedic.HumanDuration(now.Sub(since)), name, state))
	f.Since = since
	f.Evidence = append(operationEvidence(op),
		syncmedic.Evidence{Field: "waits for", Value: name},
		syncmedic.Evidence{Field: "health of " + name, Value: state},
		syncmedic.Evidence{Field: "new syncs", Value: "refused while this operation runs (\"another operation is already in progress\")"})
	if t := res.Health.LastTransitionTime; t != nil {
		at := t.Time
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "health since", Value: at.UTC().Format(time.RFC3339), Since: &at})
	}
	f.Remedy = waitingForHealthRemedy(obs, res)
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// WaitsOnUnknownHealth reports whether app's operation waits for the healthy state of a resource whose health app
// does not carry (v3 argocd-server's List leaves status.resources[].health out; Get and Watch fill it in).
func WaitsOnUnknownHealth(app *v1alpha1.Application) bool {
	op := app.Status.OperationState
	if op == nil || op.Phase != synccommon.OperationRunning {
		return false
	}
	how, ref, ok := parseWaiting(op.Message)
	if !ok || how != waitHealthy {
		return false
	}
	r := waitedResource(AppObservation{App: app}, ref)
	return r == nil || r.Health == nil
}

// waitedResource returns the application's resource status the operation waits for: the one named by ref in the
// destination namespace, else any of that group, kind and name.
func waitedResource(obs AppObservation, ref hookRef) *v1alpha1.ResourceStatus {
	var found *v1alpha1.ResourceStatus
	for i := range obs.App.Status.Resources {
		r := &obs.App.Status.Resources[i]
		if r.Group != ref.Group || r.Kind != ref.Kind || r.Name != ref.Name {
			continue
		}
		if r.Namespace == obs.App.Spec.Destination.Namespace {
			return r
		}
		if found == nil {
			found = r
		}
	}
	return found
}

// resourceLabel names a resource status as a person reads it: "Deployment shop/web".
func resourceLabel(r *v1alpha1.ResourceStatus) string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// waitingForHealthRemedy is what a person does about a sync held by an unhealthy resource: find out why it is not
// healthy and fix that (the operation moves on by itself once it is Healthy), or abort the operation.
func waitingForHealthRemedy(obs AppObservation, r *v1alpha1.ResourceStatus) syncmedic.Remedy {
	kind := kindLower(r.Kind)
	if r.Group != "" {
		kind += "." + r.Group // kubectl's kind.group form: never ambiguous with another group's kind
	}
	ns := ""
	if r.Namespace != "" {
		ns = "-n " + r.Namespace + " "
	}
	return syncmedic.Remedy{
		Action: syncmedic.ActionNone,
		Description: "The sync waits until this resource is Healthy (it fails only if the resource turns Degraded), and Argo CD refuses every new sync meanwhile. " +
			"Look at why it is not healthy (its events, its pods' readiness and logs) and fix that in Git or in the cluster: the operation then moves on by itself. " +
			"If you decide to abort the sync instead, terminate the operation; then sync again once the cause is fixed.",
		Commands: []string{
			fmt.Sprintf("kubectl %sdescribe %s %s", ns, kind, r.Name),
			fmt.Sprintf("kubectl %sget events --field-selector involvedObject.name=%s", ns, r.Name),
			"argocd app terminate-op " + cliAppName(obs),
		},
	}
}
