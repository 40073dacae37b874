package rules

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// DefaultControllerNotProcessing is how long an application with an operation in progress may go without a
// reconciliation before argocd/controller-not-processing reports it: three reconciliation periods of 180 s plus a
// minute of margin. A healthy application-controller re-compares every application at least every 2×timeout +
// jitter: its Application informer resyncs every timeout.reconciliation, and a resync that comes just before
// reconciledAt + timeout finds nothing expired, so the next one refreshes (needRefreshAppStatus). The defaults are
// timeout.reconciliation 180 s with no jitter on v2.14.21 (360 s at worst) and 120 s with 60 s of jitter on v3.x
// (300 s at worst), both within 3 × 180 s.
const DefaultControllerNotProcessing = 10 * time.Minute

// controllerShardConfigMap is the ConfigMap where Argo CD's dynamic sharding records which controller replica owns
// which shard (common.ArgoCDAppControllerShardConfigMapName in v2.14.21 and v3.6.1).
const controllerShardConfigMap = "argocd-app-controller-shard-cm"

// ControllerNotProcessing reports an application whose operation is in progress (Running or Terminating) while the
// application-controller has not reconciled it (status.reconciledAt) for longer than the threshold: the controller
// is down or restarting, is still syncing its cluster cache, or the replica owning the app's shard is gone. Nothing
// about the operation is decided meanwhile: argocd-server still answers and shows hooks finished from its cache, but
// only the controller records them (gitops-engine reads running hooks when the controller processes the app), and a
// terminate would stay pending, then end a healthy sync as "Operation terminated" once it is back. So the finding
// has no remedy to apply, only what to check; Evaluate reports it alone for that application.
//
// An application never reconciled (no reconciledAt) is not judged. A controller run with timeout.reconciliation 0
// (only webhooks and resource events refresh) does not move reconciledAt while nothing changes: raise the threshold
// there.
func ControllerNotProcessing(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	app := obs.App
	op := app.Status.OperationState
	r := app.Status.ReconciledAt
	if op == nil || (op.Phase != synccommon.OperationRunning && op.Phase != synccommon.OperationTerminating) || r == nil {
		return nil
	}
	if now.Sub(r.Time) < th.ControllerNotProcessing {
		return nil
	}
	ns := controllerNamespace(app)
	f := syncmedic.NewFinding(syncmedic.RuleControllerNotProcessing, appObjectRef(obs),
		fmt.Sprintf("Argo CD's application-controller is not processing %s: it last reconciled it %s ago while its operation is %s; nothing is terminated until it does",
			appName(obs), syncmedic.HumanDuration(now.Sub(r.Time)), op.Phase))
	f.Since = r.Time
	f.Evidence = append([]syncmedic.Evidence{reconciledEvidence(app)}, operationEvidence(op)...)
	for _, ref := range waitingHooks(op) {
		if live := liveHook(obs, ref); live != nil {
			if done, ev, _ := hookFinishedAt(live); done {
				f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "hook " + ref.String(), Value: "finished: " + ev + " (the controller has not recorded it)"})
			}
		} else if obs.HooksKnown {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "hook " + ref.String(), Value: "not found in Argo CD's resource tree"})
		}
	}
	f.Remedy = syncmedic.Remedy{
		Action: syncmedic.ActionNone,
		Description: fmt.Sprintf("Find out why the application-controller in namespace %s does not process this application: its pods and StatefulSet (crash loop, OOM, stuck starting while it syncs its cluster cache), "+
			"the shard that owns the app (ARGOCD_CONTROLLER_REPLICAS must match the StatefulSet's replicas; with dynamic sharding the %s ConfigMap names each replica's shard and heartbeat), "+
			"and the controller's logs for this app. Do not terminate the operation meanwhile: the terminate waits for the controller too, and once it is back it ends a sync that would have succeeded. "+
			"The controller resumes the operation and records the hooks that finished while it was away.", ns, controllerShardConfigMap),
		Commands: []string{
			fmt.Sprintf("kubectl -n %s get statefulset,pods -l app.kubernetes.io/name=argocd-application-controller -o wide", ns),
			fmt.Sprintf("kubectl -n %s get configmap %s -o yaml", ns, controllerShardConfigMap),
			fmt.Sprintf("kubectl -n %s get statefulset argocd-application-controller -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].env[?(@.name==\"ARGOCD_CONTROLLER_REPLICAS\")].value}'", ns),
			fmt.Sprintf("kubectl -n %s logs statefulset/argocd-application-controller --since=1h | grep '%s'", ns, app.Name),
		},
	}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// controllerNamespace is the namespace of the application-controller that processes app: status.controllerNamespace
// (written by the controller, apps in any namespace included), else the app's own namespace.
func controllerNamespace(app *v1alpha1.Application) string {
	if app.Status.ControllerNamespace != "" {
		return app.Status.ControllerNamespace
	}
	return app.Namespace
}

// reconciledEvidence is the controller's own record of when it last compared the application: status.reconciledAt.
func reconciledEvidence(app *v1alpha1.Application) syncmedic.Evidence {
	r := app.Status.ReconciledAt
	if r == nil {
		return syncmedic.Evidence{Field: "status.reconciledAt", Value: "never (the application-controller has not reconciled the application)"}
	}
	t := r.Time
	return syncmedic.Evidence{Field: "status.reconciledAt", Value: t.UTC().Format(time.RFC3339), Since: &t}
}
