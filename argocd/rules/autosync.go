package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// The prefixes of the SyncError condition the application-controller writes when its automated sync skips a revision
// whose last sync failed: "Failed sync attempt to <sha>: <message>" (v2.14.21 controller/appcontroller.go:2125-2127)
// and "Failed last sync attempt to [<sha>]: <message>" (v3.6.1 controller/appcontroller.go:2700-2704).
const (
	autoSyncFailedV2 = "Failed sync attempt to "
	autoSyncFailedV3 = "Failed last sync attempt to "
)

// AutoSyncNotRetried reports an application with automated sync whose last sync to its target revision failed and
// which the controller will not sync again (argo-cd #18442, #23591): autoSync skips a revision it already attempted
// when that attempt did not succeed, selfHeal or not, and says so in a SyncError condition. Only a new revision (a
// commit, a changed source) or a sync a person starts moves the application again. The retries of the operation
// itself (syncPolicy.retry) come before: while they last, the operation stays Running with finishedAt set, and only
// the attempt that exhausts them ends Failed.
//
// Nothing is reported unless the controller said it (the condition), the operation is over (Failed or Error, no
// new operation requested), the application is still OutOfSync, and its target revision is the one that failed: a
// new revision is synced by the controller on its next pass.
func AutoSyncNotRetried(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	app := obs.App
	op := app.Status.OperationState
	if app.Spec.SyncPolicy == nil || app.Spec.SyncPolicy.Automated == nil || app.Operation != nil || app.DeletionTimestamp != nil {
		return nil
	}
	if op == nil || (op.Phase != synccommon.OperationFailed && op.Phase != synccommon.OperationError) || op.FinishedAt == nil {
		return nil
	}
	cond, revision, ok := autoSyncSkipped(app)
	if !ok {
		return nil
	}
	if s := app.Status.Sync.Status; s != "" && s != v1alpha1.SyncStatusCodeOutOfSync {
		return nil
	}
	failed := attemptedRevision(op)
	if target := app.Status.Sync.Revision; target != "" && failed != "" && target != failed {
		return nil // a new revision: the controller syncs it on its next pass
	}
	since := op.FinishedAt.Time
	if now.Sub(since) < th.AutoSyncNotRetried {
		return nil
	}
	if failed == "" {
		failed = revision
	}
	f := syncmedic.NewFinding(syncmedic.RuleAutoSyncNotRetried, appObjectRef(obs),
		fmt.Sprintf("Automated sync of %s to %s failed %s ago and Argo CD will not retry it: %s", appName(obs), shortRevision(failed), syncmedic.HumanDuration(now.Sub(since)), op.Message))
	f.Since = since
	f.Evidence = append(operationEvidence(op),
		syncmedic.Evidence{Field: "condition " + v1alpha1.ApplicationConditionSyncError, Value: cond.Message},
		syncmedic.Evidence{Field: "sync.status", Value: string(v1alpha1.SyncStatusCodeOutOfSync) + " at " + failed},
		syncmedic.Evidence{Field: "initiatedBy", Value: initiator(op)})
	if op.RetryCount > 0 {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "retries", Value: fmt.Sprintf("%d, all failed", op.RetryCount)})
	}
	f.Remedy = syncmedic.Remedy{
		Action: syncmedic.ActionNone,
		Description: "Argo CD's automated sync does not try a revision again once its sync failed (a hard refresh does not change that). " +
			"Fix the cause in the message above, then push a new commit (automated sync picks up the new revision), or sync this revision by hand once the cluster side is fixed.",
		Commands: []string{"argocd app get " + cliAppName(obs), "argocd app sync " + cliAppName(obs)},
	}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// autoSyncSkipped returns the controller's SyncError condition saying it skips the failed revision, and the revision
// it names.
func autoSyncSkipped(app *v1alpha1.Application) (v1alpha1.ApplicationCondition, string, bool) {
	for _, c := range app.Status.Conditions {
		if c.Type != v1alpha1.ApplicationConditionSyncError {
			continue
		}
		rest, ok := strings.CutPrefix(c.Message, autoSyncFailedV3)
		if !ok {
			rest, ok = strings.CutPrefix(c.Message, autoSyncFailedV2)
		}
		if !ok {
			continue
		}
		rev, _, _ := strings.Cut(rest, ": ")
		return c, strings.Trim(rev, "[]"), true
	}
	return v1alpha1.ApplicationCondition{}, "", false
}

// attemptedRevision is the revision the finished operation synced: the one it resolved, else the one requested.
func attemptedRevision(op *v1alpha1.OperationState) string {
	if op.SyncResult != nil && op.SyncResult.Revision != "" {
		return op.SyncResult.Revision
	}
	return syncRevision(op)
}

// shortRevision shortens a Git SHA the way the Argo CD UI shows it.
func shortRevision(rev string) string {
	if len(rev) == 40 && strings.Trim(rev, "0123456789abcdef") == "" {
		return rev[:7]
	}
	return rev
}

// initiator says who started the operation: the automated sync, or a person.
func initiator(op *v1alpha1.OperationState) string {
	if op.Operation.InitiatedBy.Automated {
		return "automated sync"
	}
	if u := op.Operation.InitiatedBy.Username; u != "" {
		return u
	}
	return "unknown"
}
