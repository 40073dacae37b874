package remedy

import (
	"fmt"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// checkRepeatable refuses, before anything is terminated, an operation that a Sync cannot repeat: a Sync through
// argocd-server always deploys the application's spec as it is today (server/application Sync records
// spec.source), so an operation that deployed something else would be replaced by a different deployment:
//   - a rollback (argocd app rollback): its sync carries the source of a history entry, which differs from today's
//     spec when the spec changed since;
//   - a local sync (argocd app sync --local): its sync carries the manifests themselves, which only the person's
//     directory holds.
//
// The remedy is then proposed only; the error says what to run by hand.
func checkRepeatable(t argocd.AppRef, app *v1alpha1.Application) (string, error) {
	st := app.Status.OperationState
	if st == nil || st.Operation.Sync == nil {
		return "", nil
	}
	so := st.Operation.Sync
	var what, byHand string
	switch {
	case len(so.Manifests) > 0:
		what = fmt.Sprintf("a local sync (%d manifests sent with the operation, argocd app sync --local)", len(so.Manifests))
		byHand = fmt.Sprintf("argocd app terminate-op %s, then run the same argocd app sync %s --local <dir> from the directory it was started with", t.Name, t.Name)
	case so.Source != nil && !app.Spec.HasMultipleSources() && !so.Source.Equals(app.Spec.Source):
		what = fmt.Sprintf("a sync of another source than the application's spec (a rollback: repoURL %s, path %q, targetRevision %q, revision %s)",
			so.Source.RepoURL, so.Source.Path, so.Source.TargetRevision, so.Revision)
		byHand = fmt.Sprintf("argocd app terminate-op %s, then roll back again to the same history entry (argocd app history %s lists them; argocd app rollback %s <id>)", t.Name, t.Name, t.Name)
	case len(so.Sources) > 0 && app.Spec.HasMultipleSources() && !so.Sources.Equals(app.Spec.Sources):
		what = fmt.Sprintf("a sync of other sources than the application's spec (a rollback of a multi-source application, revisions %v)", so.Revisions)
		byHand = fmt.Sprintf("argocd app terminate-op %s, then roll back again to the same history entry (argocd app history %s lists them; argocd app rollback %s <id>)", t.Name, t.Name, t.Name)
	default:
		return "", nil
	}
	step := fmt.Sprintf("app=%s: the stuck operation is %s, which a new Sync cannot repeat: not terminating", t, what)
	return step, syncmedic.Permanent(fmt.Errorf("argocd %s %s: the stuck operation is %s; a new Sync deploys the application's spec as it is today, "+
		"so syncmedic does not terminate it (proposed only). By hand: %s", argocd.CallSync, t, what, byHand))
}
