package remedy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// resyncPlan describes, for dry-run, the steps of terminate-and-resync.
func (r *Remedies) resyncPlan(t argocd.AppRef, p map[string]string) []string {
	req := syncRequestFromParams(t, p)
	return []string{
		fmt.Sprintf("GetApplicationSyncWindows app=%s: stop unless an unattended sync may run now; CanI applications, override when the sync names a revision other than the targetRevision (Argo CD v3.2+); "+
			"the server's sync-with-replace setting when the sync carries Replace=true (Argo CD v3.0+)", t),
		fmt.Sprintf("TerminateOperation app=%s (only if its operation is still Running, and is the one started at %s)", t, p[rules.ParamOperationStartedAt]),
		fmt.Sprintf("wait on Watch app=%s until the operation phase leaves Running/Terminating; no sync if it ended Succeeded", t),
		"Sync " + describeSync(req) + ` (retried with backoff while Argo CD answers "another operation is already in progress")`,
	}
}

// planResync is the dry run of a remedy that ends in terminate-and-resync: it reads the application, so that the
// plan names the live operation it is for (its startedAt and phase: a person's confirmation covers exactly that
// operation, see remedy.planDigest), and refuses with a permanent error when that operation already ended by
// itself: there is nothing left to fix, and a sync would run every hook again.
func (r *Remedies) planResync(ctx context.Context, t argocd.AppRef, p map[string]string) (string, error) {
	app, err := r.getApp(ctx, t)
	if err != nil {
		return "Get failed", err
	}
	startedAt := p[rules.ParamOperationStartedAt]
	if step, ended := r.endedByItself(t, app, startedAt, p[rules.ParamOperationPhase]); ended {
		return step, syncmedic.Permanent(errors.New(step + " — re-plan if it is stuck again"))
	}
	return fmt.Sprintf("Get app=%s: operation started at %s, phase %s (the plan is for this operation only)", t, startedAtOf(app), phaseOf(app)), nil
}

// superseded reports whether the application has moved past the operation the finding was about: a newer operation
// started, or a new sync was requested (Sync clears the operation state and sets the operation).
func superseded(app *v1alpha1.Application, startedAt string) bool {
	st := app.Status.OperationState
	if st == nil {
		return app.Operation != nil
	}
	return startedAt != "" && startedAtOf(app) != startedAt
}

func stopped(app *v1alpha1.Application) bool {
	st := app.Status.OperationState
	return st == nil || (st.Phase != synccommon.OperationRunning && st.Phase != synccommon.OperationTerminating)
}

// endedByItself reports whether the operation started at startedAt is no longer Running for a reason other than a
// TerminateOperation of these remedies: it completed (Succeeded, Failed, Error), someone else is terminating it, or
// the application holds no operation state. Syncing then would repeat a sync that nobody needs repeated (every hook
// runs again); the step says when and how it ended. planned is the phase the finding saw (rules.ParamOperationPhase):
// an operation still in that finished phase is the one the plan was made for.
func (r *Remedies) endedByItself(t argocd.AppRef, app *v1alpha1.Application, startedAt, planned string) (string, bool) {
	st := app.Status.OperationState
	if st == nil {
		return fmt.Sprintf("app=%s has no operation state any more: the operation this plan was for is gone; nothing to fix", t), true
	}
	if st.Phase == synccommon.OperationRunning || r.terminatedHere(t, startedAt) {
		return "", false
	}
	if planned != "" && string(st.Phase) == planned && (startedAt == "" || startedAtOf(app) == startedAt) {
		return "", false // the plan was made for this finished operation (hook-immutable's failed sync): it did not end by itself since
	}
	if st.Phase == synccommon.OperationTerminating {
		return fmt.Sprintf("the operation of app=%s started at %s is being terminated by someone else (%s): not syncing over their decision; nothing to fix", t, startedAtOf(app), st.Message), true
	}
	ended := "an unknown time"
	if st.FinishedAt != nil {
		ended = st.FinishedAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("the operation this plan was for (app=%s, started at %s) ended at %s (phase %s: %s); nothing to fix", t, startedAtOf(app), ended, st.Phase, st.Message), true
}

// terminatedHere reports whether these remedies sent the TerminateOperation that stopped the operation of t started
// at startedAt (an earlier attempt whose Sync failed, retried now): that operation must still be synced again.
func (r *Remedies) terminatedHere(t argocd.AppRef, startedAt string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return startedAt != "" && r.terminated[t.String()] == startedAt
}

// rememberTerminated records that these remedies terminated the operation of t started at startedAt; forget drops
// it once the new sync is requested (or the application moved on).
func (r *Remedies) rememberTerminated(t argocd.AppRef, startedAt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated[t.String()] = startedAt
}

func (r *Remedies) forgetTerminated(t argocd.AppRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.terminated, t.String())
}

// resync terminates the stuck operation (when still Running), waits for the stop, and syncs again. It re-reads the
// application first and does nothing, with a step saying why, when the operation it was planned for is no longer
// the one running: superseded by a newer one, or ended by itself (endedByItself). It syncs only an operation that
// its own TerminateOperation stopped, and not when that operation finished Succeeded before the terminate reached
// it.
func (r *Remedies) resync(ctx context.Context, t argocd.AppRef, p map[string]string) (syncmedic.Outcome, error) {
	var out syncmedic.Outcome
	startedAt := p[rules.ParamOperationStartedAt]
	app, err := r.getApp(ctx, t)
	if err != nil {
		return out, err
	}
	if superseded(app, startedAt) {
		r.forgetTerminated(t)
		out.Steps = append(out.Steps, fmt.Sprintf("app=%s has a newer operation than the stuck one: nothing to do", t))
		return out, nil
	}
	if step, ended := r.endedByItself(t, app, startedAt, p[rules.ParamOperationPhase]); ended {
		out.Steps = append(out.Steps, step+": not syncing again")
		return out, nil
	}
	req := syncRequest(t, app, p)
	// Never terminate what cannot be synced again, and never sync unattended where a person could not: a sync
	// window, a missing permission or a server setting would refuse the Sync and leave the application terminated.
	if step, err := r.checkResync(ctx, t, app, req); err != nil {
		out.Steps = append(out.Steps, step)
		return out, err
	}
	if !stopped(app) {
		step, changed, err := r.terminate(ctx, t, p, false)
		out.Steps, out.Changed = append(out.Steps, step), changed
		if err != nil {
			return out, err
		}
		if changed {
			r.rememberTerminated(t, startedAt)
			// Cut off from here on (shutdown past the drain, a lost lead, a killed Pod), the next leader finds this
			// checkpoint and finishes the sync (Resume) instead of leaving the application terminated.
			if err := syncmedic.RecordCheckpoint(ctx, out.Steps, PendingSync); err != nil {
				r.o.Log.Warn("the checkpoint after TerminateOperation was not saved: cut off now, the next leader reports the remedy as may have run", "app", t.String(), "err", err)
			}
		}
		if !changed && !r.terminatedHere(t, startedAt) {
			// terminate re-read the application: the operation ended (or someone else is terminating it) just
			// before the TerminateOperation would have been sent.
			out.Steps = append(out.Steps, fmt.Sprintf("app=%s: the operation stopped by itself before syncmedic terminated it: not syncing again", t))
			return out, nil
		}
		app, err = r.waitStopped(ctx, t)
		if err != nil {
			return out, err
		}
		out.Steps = append(out.Steps, fmt.Sprintf("operation of app=%s stopped: phase %s", t, phaseOf(app)))
		if superseded(app, startedAt) {
			r.forgetTerminated(t)
			out.Steps = append(out.Steps, fmt.Sprintf("app=%s has a newer operation: not syncing again", t))
			return out, nil
		}
	}
	if phaseOf(app) == string(synccommon.OperationSucceeded) {
		// The controller finished the operation before it processed the terminate: it deployed what it was syncing.
		r.forgetTerminated(t)
		out.Steps = append(out.Steps, fmt.Sprintf("app=%s: the operation ended Succeeded before the terminate reached it: nothing to sync again", t))
		return out, nil
	}
	step, err := r.sync(ctx, t, req, startedAt)
	out.Steps = append(out.Steps, step)
	if _, refused := syncmedic.IsWriteRefused(err); refused && out.Changed {
		err = syncmedic.Permanent(fmt.Errorf("app=%s: syncmedic terminated its operation started at %s, but the new sync was %w; "+
			"the application stays off that sync until someone syncs it: check it and sync it by hand (argocd app sync %s)", t, startedAt, err, t))
	}
	if err == nil {
		r.forgetTerminated(t)
		if !strings.HasPrefix(step, "skipped") {
			out.Changed = true
		}
	}
	return out, err
}

// checkResync decides, before anything is changed, whether the Sync req would repeat the stuck operation (see
// checkRepeatable) and would be accepted and run: no sync window
// blocks an unattended sync now (which also means none blocks the Terminate), the server accepts the Replace=true
// req may carry (see checkReplace), and the account may name the revision req names (see checkOverride).
func (r *Remedies) checkResync(ctx context.Context, t argocd.AppRef, app *v1alpha1.Application, req *application.ApplicationSyncRequest) (string, error) {
	if step, err := checkRepeatable(t, app); err != nil {
		return step, err
	}
	if step, err := r.checkSyncWindows(ctx, t); err != nil {
		return step, err
	}
	if step, err := r.checkReplace(ctx, t, req); err != nil {
		return step, err
	}
	return r.checkOverride(ctx, t, app, req)
}

// startedAtOf is the start of app's operation as the findings name it (RFC 3339, UTC), "" without one.
func startedAtOf(app *v1alpha1.Application) string {
	if app.Status.OperationState == nil {
		return ""
	}
	return app.Status.OperationState.StartedAt.UTC().Format(time.RFC3339)
}

func phaseOf(app *v1alpha1.Application) string {
	if app.Status.OperationState == nil {
		return "none"
	}
	return string(app.Status.OperationState.Phase)
}

// lostReplyAttempts bounds the retries of a call whose connection dropped before the reply: before each retry the
// application is read again, so a call that did land is never made twice.
const lostReplyAttempts = 5

// getApp reads the application, retrying a dropped connection.
func (r *Remedies) getApp(ctx context.Context, t argocd.AppRef) (*v1alpha1.Application, error) {
	backoff := r.o.RetryBackoff
	for attempt := 1; ; attempt++ {
		app, err := r.o.Client.Get(ctx, t.Query())
		if err == nil {
			return app, nil
		}
		err = argocd.Classify(argocd.CallGet, t.String(), err)
		if syncmedic.IsPermanent(err) || attempt >= lostReplyAttempts || !sleepCtx(ctx, backoff) {
			return nil, err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// terminate calls TerminateOperation unless the operation already stopped or is already terminating. When the
// connection drops before the reply, it reads the application to learn whether the call landed before retrying.
// With checkWindows it first makes sure the controller would carry the terminate out (see checkTerminateWindows);
// terminate-and-resync has checked the stricter unattended-sync windows already.
func (r *Remedies) terminate(ctx context.Context, t argocd.AppRef, p map[string]string, checkWindows bool) (string, bool, error) {
	backoff := r.o.RetryBackoff
	for attempt := 1; ; attempt++ {
		lost := attempt > 1
		get := r.getApp
		if lost {
			get = r.getAppAfterLostReply
		}
		app, err := get(ctx, t)
		if err != nil {
			return "Get failed", false, err
		}
		switch {
		case superseded(app, p[rules.ParamOperationStartedAt]) || stopped(app):
			if lost {
				return fmt.Sprintf("TerminateOperation app=%s (reply lost; the operation has stopped: phase %s)", t, phaseOf(app)), true, nil
			}
			return fmt.Sprintf("operation of app=%s is not running (phase %s): nothing to terminate", t, phaseOf(app)), false, nil
		case app.Status.OperationState.Phase == synccommon.OperationTerminating:
			if lost {
				return fmt.Sprintf("TerminateOperation app=%s (reply lost; the operation is terminating)", t), true, nil
			}
			return fmt.Sprintf("operation of app=%s is already terminating", t), false, nil
		}
		if step, err := checkProcessing(t, app, p); !lost && err != nil {
			return step, false, err
		}
		if checkWindows && attempt == 1 {
			if step, err := r.checkTerminateWindows(ctx, t, app); err != nil {
				return step, false, err
			}
		}
		req := &application.OperationTerminateRequest{Name: strPtr(t.Name)}
		if t.Namespace != "" {
			req.AppNamespace = strPtr(t.Namespace)
		}
		if t.Project != "" {
			req.Project = strPtr(t.Project)
		}
		if err := syncmedic.BeforeWrite(ctx, fmt.Sprintf("TerminateOperation app=%s", t)); err != nil {
			return fmt.Sprintf("TerminateOperation app=%s not sent: the policy refused it right before it", t), false, err
		}
		_, err = r.o.Client.TerminateOperation(ctx, req)
		if err == nil {
			r.o.Log.Info("terminated operation", "app", t.String(), "action", syncmedic.ActionTerminateAndResync)
			return fmt.Sprintf("TerminateOperation app=%s", t), true, nil
		}
		if argocd.IsNoOperation(err) {
			return r.noOperation(ctx, t, p, lost)
		}
		err = argocd.Classify(argocd.CallTerminateOperation, t.String(), err)
		if syncmedic.IsPermanent(err) || attempt >= lostReplyAttempts {
			return "TerminateOperation failed", false, err
		}
		r.o.Log.Warn("TerminateOperation interrupted, checking whether it landed", "app", t.String(), "error", err)
		if !sleepCtx(ctx, backoff) {
			return "TerminateOperation interrupted", false, ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// noOperation handles TerminateOperation's "No operation is in progress": argocd-server answers it when the
// application's .operation is empty, which is normal once the operation finished, but also while
// status.operationState still says Running or Terminating (argo-cd #17155, #18613, #23765). The controller only
// processes an operation that .operation holds, so that state never ends by itself: waiting for the stop would wait
// out StopTimeout on every attempt, and a new sync would start over an operation whose end nobody recorded.
// It reads the application again and returns a permanent error in that state.
func (r *Remedies) noOperation(ctx context.Context, t argocd.AppRef, p map[string]string, lost bool) (string, bool, error) {
	app, err := r.getApp(ctx, t)
	if err != nil {
		return "Get failed", false, err
	}
	if superseded(app, p[rules.ParamOperationStartedAt]) || stopped(app) {
		return fmt.Sprintf("operation of app=%s already finished: nothing to terminate", t), lost, nil
	}
	st := app.Status.OperationState
	step := fmt.Sprintf("app=%s: argocd-server says no operation is in progress while its operation state says %s: not waiting, not syncing", t, st.Phase)
	return step, false, syncmedic.Permanent(fmt.Errorf("argocd %s %s: argocd-server answers \"No operation is in progress\" because the "+
		"application's .operation field is empty, yet status.operationState says %s (started %s): the application controller no "+
		"longer processes this operation and TerminateOperation cannot reach it (argo-cd #17155, #18613, #23765). syncmedic "+
		"neither waits for it nor syncs over it; look at the application controller's log for this application, and sync it "+
		"by hand once the state is understood (argocd app sync starts a new operation)",
		argocd.CallTerminateOperation, t, st.Phase, st.StartedAt.UTC().Format(time.RFC3339)))
}

// waitStopped follows the application on the Watch API (not by polling) until its operation leaves
// Running/Terminating. A dropped stream is re-opened; the server sends the current state first on every open.
func (r *Remedies) waitStopped(ctx context.Context, t argocd.AppRef) (*v1alpha1.Application, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.StopTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		app, err := r.watchUntil(ctx, t, stopped)
		if err == nil {
			return app, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("argocd app=%s: the operation did not stop within %s after TerminateOperation (is the application controller running?): %w", t, r.o.StopTimeout, ctx.Err())
		}
		if syncmedic.IsPermanent(err) {
			return nil, err
		}
		r.o.Log.Warn("argocd watch of one application dropped, re-opening", "app", t.String(), "error", err)
		if !sleepCtx(ctx, backoff) {
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (r *Remedies) watchUntil(ctx context.Context, t argocd.AppRef, cond func(*v1alpha1.Application) bool) (*v1alpha1.Application, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := t.Query()
	if t.Project != "" {
		q.Projects = []string{t.Project}
	}
	stream, err := r.o.Client.Watch(wctx, q)
	if err != nil {
		return nil, argocd.Classify(argocd.CallWatch, t.String(), err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return nil, argocd.Classify(argocd.CallWatch, t.String(), err)
		}
		if ev.Application.Name == t.Name && cond(&ev.Application) {
			app := ev.Application
			return &app, nil
		}
	}
}

// sync requests the new operation, retrying "another operation is already in progress" with backoff. Before each
// retry it reads the application: if a newer operation is there (someone else's, or ours whose reply was lost on a
// dropped connection), it does not sync again.
func (r *Remedies) sync(ctx context.Context, t argocd.AppRef, req *application.ApplicationSyncRequest, startedAt string) (string, error) {
	backoff := r.o.RetryBackoff
	var last error
	for attempt := 1; attempt <= r.o.SyncAttempts; attempt++ {
		if err := syncmedic.BeforeWrite(ctx, "Sync "+describeSync(req)); err != nil {
			return "Sync " + describeSync(req) + " not sent: the policy refused it right before it", err
		}
		_, err := r.o.Client.Sync(ctx, req)
		if err == nil {
			r.o.Log.Info("requested sync", "app", t.String(), "action", syncmedic.ActionTerminateAndResync, "attempt", attempt)
			return "Sync " + describeSync(req), nil
		}
		lost := !argocd.IsAnotherOperation(err)
		if lost {
			if err = argocd.Classify(argocd.CallSync, t.String(), err); syncmedic.IsPermanent(err) {
				return "Sync failed", err
			}
		}
		last = err
		if !sleepCtx(ctx, backoff) {
			return "Sync interrupted", ctx.Err()
		}
		backoff = min(2*backoff, 10*time.Second)
		get := r.getApp
		if lost {
			get = r.getAppAfterLostReply
		}
		app, gerr := get(ctx, t)
		if gerr != nil {
			return "Get failed", gerr
		}
		if superseded(app, startedAt) {
			if lost {
				return "Sync " + describeSync(req) + " (reply lost; the new operation is there)", nil
			}
			return fmt.Sprintf("skipped Sync: app=%s has a newer operation already", t), nil
		}
	}
	return "Sync failed", fmt.Errorf("argocd Sync %s: no success after %d attempts: %w", t, r.o.SyncAttempts, last)
}

// syncRequest repeats the stuck operation: its SyncOperation (revision(s), prune, options, strategy, resources) and
// retry strategy as the application reports them, else the finding's parameters. For an auto-synced application
// it names no revision: argocd-server refuses one other than the targetRevision with FailedPrecondition ("Cannot
// sync to …: auto-sync currently set to …" on every version; "Cannot sync source …" for multi-source apps from
// v3.3.0, server/application resolveSourceRevisions), and a multi-source operation's Revisions are resolved commits,
// never the targetRevision literal (v2.14.21 to v3.2.11 accept them through a check that never fires, and sync the
// old commits). Auto-sync syncs the targetRevision(s) too, so the new sync is what the controller would start.
func syncRequest(t argocd.AppRef, app *v1alpha1.Application, p map[string]string) *application.ApplicationSyncRequest {
	automated := app.Spec.SyncPolicy != nil && app.Spec.SyncPolicy.Automated != nil
	st := app.Status.OperationState
	if st == nil || st.Operation.Sync == nil {
		req := syncRequestFromParams(t, p)
		if automated {
			req.Revision, req.Revisions, req.SourcePositions = nil, nil, nil
		}
		return req
	}
	so := st.Operation.Sync
	req := baseSyncRequest(t)
	switch {
	case automated:
		// Name none: see above.
	case len(so.Revisions) > 0:
		req.Revisions = so.Revisions
		for i := range so.Revisions {
			req.SourcePositions = append(req.SourcePositions, int64(i+1))
		}
	case so.Revision != "":
		req.Revision = strPtr(so.Revision)
	case st.SyncResult != nil && st.SyncResult.Revision != "":
		req.Revision = strPtr(st.SyncResult.Revision)
	}
	prune := so.Prune
	req.Prune = &prune
	req.SyncOptions = &application.SyncOptions{Items: so.SyncOptions}
	req.Strategy = so.SyncStrategy
	for i := range so.Resources {
		req.Resources = append(req.Resources, &so.Resources[i])
	}
	if st.Operation.Retry.Limit != 0 || st.Operation.Retry.Backoff != nil {
		retry := st.Operation.Retry
		req.RetryStrategy = &retry
	}
	return req
}

func syncRequestFromParams(t argocd.AppRef, p map[string]string) *application.ApplicationSyncRequest {
	req := baseSyncRequest(t)
	if rev := p[rules.ParamRevision]; rev != "" {
		req.Revision = strPtr(rev)
	}
	if revs := splitParam(p, rules.ParamRevisions); len(revs) > 0 {
		req.Revisions = revs
		for i := range revs {
			req.SourcePositions = append(req.SourcePositions, int64(i+1))
		}
	}
	prune := boolParam(p, rules.ParamPrune)
	req.Prune = &prune
	req.SyncOptions = &application.SyncOptions{Items: splitParam(p, rules.ParamSyncOptions)}
	return req
}

func baseSyncRequest(t argocd.AppRef) *application.ApplicationSyncRequest {
	req := &application.ApplicationSyncRequest{Name: strPtr(t.Name)}
	if t.Namespace != "" {
		req.AppNamespace = strPtr(t.Namespace)
	}
	if t.Project != "" {
		req.Project = strPtr(t.Project)
	}
	return req
}

func describeSync(req *application.ApplicationSyncRequest) string {
	s := "app=" + req.GetName()
	if ns := req.GetAppNamespace(); ns != "" {
		s = "app=" + ns + "/" + req.GetName()
	}
	switch {
	case req.GetRevision() != "":
		s += " revision=" + req.GetRevision()
	case len(req.Revisions) > 0:
		s += " revisions=" + strings.Join(req.Revisions, ",")
	default:
		s += " revision=(targetRevision)"
	}
	if req.GetPrune() {
		s += " prune=true"
	}
	if req.SyncOptions != nil && len(req.SyncOptions.Items) > 0 {
		s += " syncOptions=" + strings.Join(req.SyncOptions.Items, ",")
	}
	if len(req.Resources) > 0 {
		s += fmt.Sprintf(" resources=%d", len(req.Resources))
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
