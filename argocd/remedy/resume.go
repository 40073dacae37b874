package remedy

import (
	"context"
	"fmt"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// PendingSync is the checkpoint terminate-and-resync records once its TerminateOperation was accepted: the new sync
// is still to be requested.
const PendingSync = "sync"

// terminatedMessage is the message the application controller (gitops-engine sync_context.go terminate) sets on the
// operation it stopped at a TerminateOperation.
const terminatedMessage = "Operation terminated"

// resyncRemedier is terminate-and-resync, which a next leader can finish after its checkpoint (syncmedic.Resumer).
type resyncRemedier struct{ r *Remedies }

var _ syncmedic.Resumer = resyncRemedier{}

func (x resyncRemedier) Remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	return x.r.TerminateAndResync(ctx, f, dryRun)
}

func (x resyncRemedier) Resume(ctx context.Context, f syncmedic.Finding, pending string) (syncmedic.Outcome, error) {
	return x.r.ResumeResync(ctx, f, pending)
}

// ResumeResync finishes a terminate-and-resync that was cut off after its TerminateOperation (pending PendingSync):
// it re-reads the application, waits for the terminated operation to stop, and requests the sync once, only while
// the application is as the terminate left it (see resumeDecision); otherwise it writes nothing and says why.
func (r *Remedies) ResumeResync(ctx context.Context, f syncmedic.Finding, pending string) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionTerminateAndResync}
	t, err := targetOf(f)
	if err != nil {
		return out, err
	}
	if pending != PendingSync {
		return out, syncmedic.Permanent(fmt.Errorf("argocd app=%s: cannot resume terminate-and-resync at step %q (only %q): check the application (argocd app get %s) and sync it by hand if it was left terminated", t, pending, PendingSync, t))
	}
	p := f.Remedy.Params
	startedAt := p[rules.ParamOperationStartedAt]
	app, err := r.getApp(ctx, t)
	if err != nil {
		return out, err
	}
	if !stopped(app) && !superseded(app, startedAt) {
		// Terminated and not yet stopped: the controller ends it (or was down when the terminate came).
		if app, err = r.waitStopped(ctx, t); err != nil {
			return out, err
		}
	}
	sync, why := resumeDecision(t, app, startedAt)
	out.Steps = append(out.Steps, why)
	if !sync {
		return out, nil
	}
	req := syncRequest(t, app, p)
	if step, err := r.checkResync(ctx, t, app, req); err != nil {
		out.Steps = append(out.Steps, step)
		return out, syncmedic.Permanent(fmt.Errorf("app=%s was left terminated by syncmedic and the pending sync cannot run now: %w; sync it by hand once it can (argocd app sync %s)", t, err, t))
	}
	step, err := r.sync(ctx, t, req, startedAt)
	out.Steps = append(out.Steps, step)
	if err != nil {
		if _, refused := syncmedic.IsWriteRefused(err); refused {
			err = syncmedic.Permanent(fmt.Errorf("app=%s was left terminated by syncmedic, and the pending sync was %w; check it and sync it by hand (argocd app sync %s)", t, err, t))
		}
		return out, err
	}
	out.Changed = true
	return out, nil
}

// resumeDecision says whether the sync pending after terminate-and-resync's TerminateOperation of the operation
// started at startedAt may be requested on app as it is now, and why (the step the attempt records). Only when that
// operation is still the application's latest, ended by the terminate, with no new operation requested by anyone,
// and the application is not already synced to the revision it was deploying.
func resumeDecision(t argocd.AppRef, app *v1alpha1.Application, startedAt string) (bool, string) {
	st := app.Status.OperationState
	switch {
	case st == nil:
		return false, fmt.Sprintf("app=%s has no operation state any more: not resuming the sync", t)
	case superseded(app, startedAt) || app.Operation != nil:
		return false, fmt.Sprintf("app=%s: someone else synced it since syncmedic terminated the operation started at %s (operation started at %s, phase %s): not syncing again", t, startedAt, startedAtOf(app), phaseOf(app))
	case st.Phase != synccommon.OperationFailed || st.Message != terminatedMessage:
		return false, fmt.Sprintf("app=%s: the operation started at %s ended by itself (phase %s: %s), not by syncmedic's terminate: not syncing again", t, startedAt, st.Phase, st.Message)
	}
	if rev := operationRevision(st); rev != "" && app.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced && app.Status.Sync.Revision == rev {
		return false, fmt.Sprintf("app=%s is already synced to %s, the revision the terminated operation was deploying: not syncing again", t, rev)
	}
	return true, fmt.Sprintf("app=%s: the operation started at %s is still the latest and ended %q by syncmedic's terminate; resuming the pending sync", t, startedAt, terminatedMessage)
}

// operationRevision is the revision a single-source operation was deploying ("" when unknown or multi-source).
func operationRevision(st *v1alpha1.OperationState) string {
	if st.SyncResult != nil && st.SyncResult.Revision != "" {
		return st.SyncResult.Revision
	}
	if st.Operation.Sync != nil {
		return st.Operation.Sync.Revision
	}
	return ""
}
