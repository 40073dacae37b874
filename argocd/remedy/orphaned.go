package remedy

import (
	"context"
	"fmt"
	"strings"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
)

// ResyncOrphaned syncs an application whose operation state was orphaned (OperationOrphaned) again: the same
// revision and options, without terminating (argocd-server refuses that). It does nothing once the state is no
// longer orphaned or a newer operation started, and never syncs where a person could not (sync windows, override).
func (r *Remedies) ResyncOrphaned(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionResyncOrphaned, DryRun: dryRun}
	t, err := targetOf(f)
	if err != nil {
		return out, err
	}
	p := f.Remedy.Params
	if dryRun {
		plan := r.resyncPlan(t, p)
		out.Steps = []string{plan[0], fmt.Sprintf("Get app=%s: stop unless .operation is still empty and the operation state still says Running/Terminating since %s", t, p[rules.ParamOperationStartedAt]), plan[3]}
		return out, nil
	}
	app, err := r.getApp(ctx, t)
	if err != nil {
		return out, err
	}
	startedAt := p[rules.ParamOperationStartedAt]
	if superseded(app, startedAt) || !rules.Orphaned(app) {
		out.Steps = append(out.Steps, fmt.Sprintf("app=%s: the operation state is no longer orphaned (phase %s, operation set: %t): nothing to do", t, phaseOf(app), app.Operation != nil))
		return out, nil
	}
	req := syncRequest(t, app, p)
	if step, err := r.checkResync(ctx, t, app, req); err != nil {
		out.Steps = append(out.Steps, step)
		return out, err
	}
	step, err := r.sync(ctx, t, req, startedAt)
	out.Steps = append(out.Steps, step)
	if err == nil && !strings.HasPrefix(step, "skipped") {
		out.Changed = true
	}
	return out, err
}
