package remedy

import (
	"context"
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// replaceSettingSince is the first release whose argocd-server can refuse a Sync carrying Replace=true
// (--sync-with-replace-allowed, argo-cd #22073, in v3.0.12); replacePublishedSince the first that publishes the
// setting in SettingsService.Get (syncWithReplaceAllowed, argo-cd #22647). In between nobody but the server's own
// flags can tell.
var (
	replaceSettingSince   = rules.Version{Major: 3, Minor: 0, Patch: 0}
	replacePublishedSince = rules.Version{Major: 3, Minor: 1, Patch: 0}
)

// checkReplace refuses, before anything is terminated, a Sync carrying Replace=true that argocd-server may refuse:
// from v3.0 its server.sync.replace.allowed (argocd-cmd-params-cm) set to "false" refuses every such Sync with
// FailedPrecondition, while the auto-sync that started the stuck operation bypasses it, so the remedy would terminate
// and then never sync again. The answer is permanent: the server reads the setting at start. A server that
// publishes no answer (v3.0.x, or an unknown version whose settings omit it) is refused too: the remedy is then
// proposed only, for a person to run.
func (r *Remedies) checkReplace(ctx context.Context, t argocd.AppRef, req *application.ApplicationSyncRequest) (string, error) {
	if req.SyncOptions == nil || !v1alpha1.SyncOptions(req.SyncOptions.Items).HasOption(synccommon.SyncOptionReplace) {
		return "", nil
	}
	ver := r.serverVersion(ctx)
	v, known := releaseVersion(ver)
	if known && v.Less(replaceSettingSince) {
		return "", nil
	}
	refuse := func(why string) (string, error) {
		step := fmt.Sprintf("app=%s: the new sync carries %s and %s: not terminating", t, synccommon.SyncOptionReplace, why)
		return step, syncmedic.Permanent(fmt.Errorf("argocd %s %s: the stuck operation was started with %s, and %s; Argo CD %s refuses such a "+
			"Sync (FailedPrecondition) when server.sync.replace.allowed is \"false\" in argocd-cmd-params-cm, so the operation was left as it is "+
			"rather than terminated with no way to sync it again. Terminate and sync by hand (argocd app terminate-op %s, then argocd app sync %s, "+
			"with or without --replace as your server allows)", argocd.CallSync, t, synccommon.SyncOptionReplace, why, versionOrUnknown(ver), t.Name, t.Name))
	}
	if known && v.Less(replacePublishedSince) {
		return refuse("this server (before v3.1) does not publish whether it allows it")
	}
	if r.o.Settings == nil {
		return refuse("no settings client is configured to ask the server whether it allows it")
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	allowed, err := r.o.Settings.SyncWithReplaceAllowed(cctx)
	if err != nil {
		return "SettingsService.Get failed: not terminating", argocd.Classify(argocd.CallSettings, t.String(), err)
	}
	if !allowed {
		return refuse("argocd-server's settings say it does not allow it (syncWithReplaceAllowed is false)")
	}
	return "", nil
}
