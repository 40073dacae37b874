package rules

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Orphaned reports whether the application's operation state says Running or Terminating while its .operation is
// empty: the application-controller processes only an operation that .operation holds (processAppOperationQueueItem,
// v2.14.21 controller/appcontroller.go:1011-1025, v3.6.1 1101-1119), and clears .operation only in the patch that
// records a completed phase (setOperationState), so nothing ends such a state by itself.
func Orphaned(app *v1alpha1.Application) bool {
	op := app.Status.OperationState
	return app.Operation == nil && op != nil && (op.Phase == synccommon.OperationRunning || op.Phase == synccommon.OperationTerminating)
}

// OperationOrphaned reports an operation state left Running (or Terminating) with no operation behind it past the
// threshold (argo-cd #17155, #18613, #23765): the UI shows "Syncing" forever, and TerminateOperation answers "No
// operation is in progress" because argocd-server terminates only what .operation holds. People reach it by clearing
// .operation by hand (the workaround those issues pass around) or by a tool that replaces the whole Application
// without the field.
//
// Time counts from the state's last change (startedAt, or StateSince when later; the watcher counts the clearing of
// .operation as a change). What clears it is a new Sync through argocd-server: SetAppOperation accepts it because
// .operation is empty, and writes the new operation with status.operationState emptied in one update (util/argo
// SetAppOperation, the same in v2.14.21 and v3.6.1; the Application CRD has no status subresource), so the controller
// starts a fresh operation. A hard refresh does not: it compares and never touches the operation state.
func OperationOrphaned(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	app := obs.App
	if !Orphaned(app) || app.DeletionTimestamp != nil {
		return nil
	}
	op := app.Status.OperationState
	since := op.StartedAt.Time
	if obs.StateSince.After(since) {
		since = obs.StateSince
	}
	if now.Sub(since) < th.OperationOrphaned {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleOperationOrphaned, appObjectRef(obs),
		fmt.Sprintf("Operation state of %s has said %s for %s with no operation behind it: Argo CD will never finish it, and terminating it answers \"No operation is in progress\"",
			appName(obs), op.Phase, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = append(operationEvidence(op),
		syncmedic.Evidence{Field: "operation", Value: "none (.operation is empty: the application controller no longer processes this operation)"},
		syncmedic.Evidence{Field: "unchanged for", Value: syncmedic.HumanDuration(now.Sub(since)), Since: &since},
		syncmedic.Evidence{Field: "initiatedBy", Value: initiator(op)})
	f.Remedy = resyncRemedy(obs, "Start a new sync of the same revision with the same options: argocd-server accepts it because no operation is set, "+
		"and replaces the orphaned operation state with the new operation in the same write (a hard refresh does not clear it, and terminating is refused). "+
		"The new sync runs every hook of the application again (migrations included).")
	f.Remedy.Action = syncmedic.ActionResyncOrphaned
	f.Remedy.Commands = []string{"argocd app get " + cliAppName(obs), syncCommand(obs, f.Remedy.Params)}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}
