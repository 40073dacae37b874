package argocd

import (
	"context"
	"errors"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// errAccessGranted ends a watch session whose account was refused `get` and has since been granted it, so that the
// stream re-lists the applications it could not see.
var errAccessGranted = errors.New("argocd: the account may now get the watched applications: re-listing them")

// accessState is what the preflight last concluded, for Ready and for logging a refusal only once.
type accessState struct {
	denied error  // nil while the account may get every watched application
	logged string // the refusal last logged at Error ("" when none)
}

// preflight asks CanI, once per connection, whether the account may get the watched applications (argocd-server
// silently filters the others out of Watch and List). A refusal is kept for Ready and logged once at Error; the
// watch goes on with what the account may see, and while refused CanI is asked again every AccessRecheck: once
// granted, the session is cancelled with errAccessGranted so the stream re-lists. A bad token is returned (the watch
// would be refused too); a CanI that fails otherwise is only logged, the watch itself says more.
func (w *Watcher) preflight(ctx context.Context, cancel context.CancelCauseFunc) error {
	if w.access == nil {
		return nil
	}
	err := CheckWatch(ctx, w.access, WatchScope(w.o.Projects, w.o.AppNamespace))
	switch {
	case err == nil:
		w.setDenied(nil)
	case IsAccessDenied(err):
		w.setDenied(err)
		go w.recheck(ctx, cancel)
	case syncmedic.IsPermanent(err):
		return err
	default:
		w.o.Log.Debug("argocd permission preflight unavailable", "instance", w.o.Instance, "error", err)
	}
	return nil
}

// recheck asks CanI every AccessRecheck until the account is granted get (then cancels the session) or ctx ends.
func (w *Watcher) recheck(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(w.o.AccessRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := CheckWatch(ctx, w.access, WatchScope(w.o.Projects, w.o.AppNamespace))
		if err == nil {
			// Not ready yet: the refusal stays until the next session's preflight clears it and the stream
			// has re-listed what it could not see.
			cancel(errAccessGranted)
			return
		}
		if IsAccessDenied(err) {
			w.setDenied(err)
		}
	}
}

// setDenied records the preflight's conclusion, logging a new refusal at Error and its end at Info.
func (w *Watcher) setDenied(err error) {
	w.accessMu.Lock()
	defer w.accessMu.Unlock()
	w.accessSt.denied = err
	switch {
	case err != nil && err.Error() != w.accessSt.logged:
		w.accessSt.logged = err.Error()
		w.o.Log.Error("argocd watch cannot see the applications: "+err.Error(), "instance", w.o.Instance)
	case err == nil && w.accessSt.logged != "":
		w.accessSt.logged = ""
		w.o.Log.Info("argocd account may now get the watched applications", "instance", w.o.Instance)
	}
}

// accessDenied returns the refusal the preflight last found, or nil.
func (w *Watcher) accessDenied() error {
	w.accessMu.Lock()
	defer w.accessMu.Unlock()
	return w.accessSt.denied
}

// listPartial says why list, read after this session's preflight, may leave out applications that exist, or "".
// argocd-server leaves out of List, silently, every application the account may not get (RBAC), and every one its
// informer has not read yet (it serves before its cache has synced; the list's resourceVersion is then empty). Such
// a list says nothing about the applications it leaves out: the loop keeps them as they were. The preflight's yes
// came before the list, and RBAC may change while it is read: CanI is asked once more after it, and only a yes on
// both sides makes the list complete (without a CanI client, as for the preflight, it is taken as complete).
func (w *Watcher) listPartial(ctx context.Context, list *v1alpha1.ApplicationList) string {
	switch {
	case w.accessDenied() != nil:
		return "the account may not get every watched application (argocd-rbac-cm)"
	case list.ResourceVersion == "":
		return "argocd-server has not finished reading the applications (its list has no resourceVersion)"
	case w.access != nil && CheckWatch(ctx, w.access, WatchScope(w.o.Projects, w.o.AppNamespace)) != nil:
		return "the account's access to the watched applications changed, or could not be checked, after the list (argocd-rbac-cm)"
	}
	return ""
}
