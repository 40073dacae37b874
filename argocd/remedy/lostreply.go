package remedy

import (
	"context"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
)

// getAppAfterLostReply reads the application after a call whose reply was lost (TerminateOperation, Sync): the
// call may have landed, and giving up now would leave the remedy half done (an operation terminated and never
// synced again), so it keeps trying with backoff through a server restart, for up to StopTimeout.
func (r *Remedies) getAppAfterLostReply(ctx context.Context, t argocd.AppRef) (*v1alpha1.Application, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.StopTimeout)
	defer cancel()
	backoff := r.o.RetryBackoff
	for {
		app, err := r.o.Client.Get(ctx, t.Query())
		if err == nil {
			return app, nil
		}
		err = argocd.Classify(argocd.CallGet, t.String(), err)
		if syncmedic.IsPermanent(err) || !sleepCtx(ctx, backoff) {
			return nil, err
		}
		r.o.Log.Warn("argocd unreachable after a lost reply, still checking whether the call landed", "app", t.String(), "error", err)
		backoff = min(2*backoff, 5*time.Second)
	}
}
