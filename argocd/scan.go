package argocd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
)

// ScanOptions configure a one-shot Scan; Client is required.
type ScanOptions struct {
	Client       Client
	Instance     string
	Projects     []string
	Selector     string
	AppNamespace string
	UIURL        string
	Thresholds   Thresholds
	// Access answers CanI for the permission preflight (default: Client, when it implements AccountClient).
	Access AccountClient
}

// Scan lists the applications once and evaluates each at now, reading live hooks only for suspicious applications
// (the same choice the Watcher makes with HookLeakAlways: whatever the server version, an application whose last
// operation ran hooks gets one look, so a one-shot scan also finds the orphans a past v2.14.3 left). Problems are
// applications whose live state could not be read; they are still judged on what the application says. An account
// that may not get the scanned applications (CanI, see CheckWatch) is refused with an *AccessError rather than
// reported as having nothing stuck, since argocd-server would list none of them. An application whose sync waits for
// a resource's health that the list does not carry is read once more with Get (waitsOnUnknownHealth).
func Scan(ctx context.Context, o ScanOptions, now time.Time) (findings []syncmedic.Finding, problems []string, err error) {
	if o.Client == nil {
		return nil, nil, errors.New("argocd scan: no client")
	}
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds()
	}
	if a := accessOf(o.Access, o.Client); a != nil {
		if err := CheckWatch(ctx, a, WatchScope(o.Projects, o.AppNamespace)); syncmedic.IsPermanent(err) {
			return nil, nil, err
		}
	}
	version := ""
	if v, err := o.Client.Version(ctx, &emptypb.Empty{}); err == nil {
		version = v.GetVersion()
	}
	w := &Watcher{o: WatcherOptions{Projects: o.Projects, Selector: o.Selector, AppNamespace: o.AppNamespace}}
	list, err := o.Client.List(ctx, w.query())
	if err != nil {
		return nil, nil, classify(CallList, "(all applications)", err)
	}
	for i := range list.Items {
		app := &list.Items[i]
		if o.AppNamespace != "" && app.Namespace != o.AppNamespace {
			continue
		}
		if waitsOnUnknownHealth(app) {
			// v3 argocd-server fills in status.resources[].health for Get and Watch, not for List: read the app
			// once more so argocd/waiting-for-health can name the resource's health.
			name, ns := app.Name, app.Namespace
			if got, err := o.Client.Get(ctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns}); err == nil {
				app = got
			} else {
				problems = append(problems, fmt.Sprintf("argocd app %s: health of the resource its sync waits for unreadable: %v", appKey(app), err))
			}
		}
		obs := AppObservation{Instance: o.Instance, App: app, ServerVersion: version, UIURL: o.UIURL}
		if needsLive(app, false, now, o.Thresholds) != liveNone {
			hooks, err := fetchHooks(ctx, o.Client, app)
			if err != nil {
				if syncmedic.IsPermanent(err) && isPermission(err) {
					return nil, nil, err
				}
				problems = append(problems, fmt.Sprintf("argocd app %s: live hooks unreadable, hook rules skipped: %v", appKey(app), err))
			} else {
				obs.Hooks, obs.HooksKnown = hooks, true
			}
		}
		findings = append(findings, Evaluate(obs, now, o.Thresholds)...)
	}
	return findings, problems, nil
}
