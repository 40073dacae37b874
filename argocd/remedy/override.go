package remedy

import (
	"context"
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// ActionOverride is the RBAC action Argo CD v3.2+ requires, with application.sync.requireOverridePrivilegeForRevisionSync
// set in argocd-cm, for a Sync that names a revision other than the application's targetRevision.
const ActionOverride = "override"

// overrideSettingSince is the first release with application.sync.requireOverridePrivilegeForRevisionSync
// (argo-cd v3.2.0 util/settings: "Up to revision 3.2, this was always false"); v3.0.12 has no such setting.
var overrideSettingSince = rules.Version{Major: 3, Minor: 2, Patch: 0}

// mayNeedOverride reports whether a Sync naming another revision may need `applications, override` on a server of
// this version: from v3.2.0, or when the version is unknown.
func mayNeedOverride(serverVersion string) bool {
	v, ok := releaseVersion(serverVersion)
	return !ok || !v.Less(overrideSettingSince)
}

// namedRevisions returns the revisions req names that differ from the application's targetRevision(s) ("HEAD" when
// empty), as argocd-server compares them (server/application resolveSourceRevisions): a Sync naming one of these
// needs `applications, override` where requireOverridePrivilegeForRevisionSync is set, and is refused with
// FailedPrecondition for an auto-synced application.
func namedRevisions(app *v1alpha1.Application, req *application.ApplicationSyncRequest) []string {
	targetRevision := func(s v1alpha1.ApplicationSource) string {
		if s.TargetRevision == "" {
			return "HEAD"
		}
		return s.TargetRevision
	}
	var out []string
	if app.Spec.HasMultipleSources() {
		for i, pos := range req.SourcePositions {
			if i >= len(req.Revisions) || pos <= 0 || int(pos) > len(app.Spec.Sources) {
				continue
			}
			if rev := req.Revisions[i]; rev != "" && rev != targetRevision(app.Spec.Sources[pos-1]) {
				out = append(out, rev)
			}
		}
		return out
	}
	if rev := req.GetRevision(); rev != "" && rev != targetRevision(app.Spec.GetSource()) {
		out = append(out, rev)
	}
	return out
}

// rbacObjects are the objects Argo CD's RBAC may check a call on the application against: "<project>/<name>", or
// "<project>/<namespace>/<name>" for an application outside the control-plane namespace.
func rbacObjects(t argocd.AppRef) []string {
	objs := []string{t.Project + "/" + t.Name}
	if t.Namespace != "" {
		// argocd-server uses the short form for its own namespace, which syncmedic cannot tell from the API:
		// both forms must be granted before the remedy relies on either.
		objs = append(objs, t.Project+"/"+t.Namespace+"/"+t.Name)
	}
	return objs
}

// checkOverride refuses, before anything is terminated, a Sync that argocd-server would refuse for lack of
// `applications, override`: on v3.2+ (or an unknown version), when req names a revision other than the
// application's targetRevision, CanI must answer yes. A "no" is permanent; a CanI that cannot be asked (no account
// client, or an error) is retryable and terminates nothing either.
func (r *Remedies) checkOverride(ctx context.Context, t argocd.AppRef, app *v1alpha1.Application, req *application.ApplicationSyncRequest) (string, error) {
	revs := namedRevisions(app, req)
	if len(revs) == 0 {
		return "", nil
	}
	ver := r.serverVersion(ctx)
	if !mayNeedOverride(ver) {
		return "", nil
	}
	if r.o.Access == nil {
		return "CanI unavailable: not terminating", fmt.Errorf("argocd %s %s: the sync names revision %v, which Argo CD v3.2+ may refuse without "+
			"`applications, override`, and no CanI client is configured to check it; not terminating", argocd.CallCanI, t, revs)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, obj := range rbacObjects(t) {
		p := argocd.Permission{Action: ActionOverride, Object: obj}
		ok, err := argocd.CanI(cctx, r.o.Access, p)
		if err != nil {
			return "CanI failed: not terminating", argocd.Classify(argocd.CallCanI, t.String(), err)
		}
		if !ok {
			step := fmt.Sprintf("app=%s: the sync names revision %v and the account lacks `%s`: not terminating", t, revs, p)
			return step, syncmedic.Permanent(fmt.Errorf("argocd %s %s: the new sync names revision %v (the stuck operation's), which Argo CD %s refuses "+
				"without `%s` when argocd-cm sets application.sync.requireOverridePrivilegeForRevisionSync; the account lacks it, so the "+
				"operation was left as it is rather than terminated with no way to sync it again. Add to argocd-rbac-cm `%s`",
				argocd.CallSync, t, revs, versionOrUnknown(ver), p, p.PolicyLine()))
		}
	}
	return "", nil
}

func versionOrUnknown(v string) string {
	if v == "" {
		return "(version unknown)"
	}
	return v
}
