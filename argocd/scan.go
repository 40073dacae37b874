package argocd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// ScanOptions configure a one-shot Scan; Client is required.
type ScanOptions struct {
	Client       Client
	Instance     string
	Projects     []string
	Selector     string
	AppNamespace string
	UIURL        string
	Thresholds   rules.Thresholds
	// Access answers CanI for the permission preflight (default: Client, when it implements AccountClient).
	Access AccountClient
	// AppSets lists the ApplicationSets for argocd/rollingsync-stalled (default: Client, when it implements
	// AppSetClient, as APIClient does).
	AppSets AppSetClient
	// Read, when set, receives what the scan read ("12 applications, 2 ApplicationSets"), for the report.
	Read *string
}

// Scan lists the applications once and evaluates each at now, reading live hooks only for suspicious applications
// (the same choice the Watcher makes with HookLeakAlways: whatever the server version, an application whose last
// operation ran hooks gets one look, so a one-shot scan also finds the orphans a past v2.14.3 left). Problems are
// applications whose live state could not be read; they are still judged on what the application says. An account
// that may not get the scanned applications (CanI, see CheckWatch) is refused with an *AccessError rather than
// reported as having nothing stuck, since argocd-server would list none of them. An application whose sync waits for
// a resource's health that the list does not carry is read once more with Get (rules.WaitsOnUnknownHealth).
func Scan(ctx context.Context, o ScanOptions, now time.Time) (findings []syncmedic.Finding, problems []string, err error) {
	if o.Client == nil {
		return nil, nil, errors.New("argocd scan: no client")
	}
	if o.Thresholds == (rules.Thresholds{}) {
		o.Thresholds = rules.DefaultThresholds()
	}
	if a := AccessOf(o.Access, o.Client); a != nil {
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
		return nil, nil, Classify(CallList, "(all applications)", err)
	}
	for i := range list.Items {
		app := &list.Items[i]
		if o.AppNamespace != "" && app.Namespace != o.AppNamespace {
			continue
		}
		if rules.WaitsOnUnknownHealth(app) {
			// v3 argocd-server fills in status.resources[].health for Get and Watch, not for List: read the app
			// once more so argocd/waiting-for-health can name the resource's health.
			name, ns := app.Name, app.Namespace
			if got, err := o.Client.Get(ctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns}); err == nil {
				app = got
			} else {
				problems = append(problems, fmt.Sprintf("argocd app %s: health of the resource its sync waits for unreadable: %v", appKey(app), err))
			}
		}
		obs := rules.AppObservation{Instance: o.Instance, App: app, ServerVersion: version, UIURL: o.UIURL}
		if rules.NeedsLive(app, false, now, o.Thresholds) != rules.LiveNone {
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
		findings = append(findings, rules.Evaluate(obs, now, o.Thresholds)...)
	}
	read := fmt.Sprintf("%d applications", len(list.Items))
	if ac := appSetsOf(o.AppSets, o.Client); ac != nil {
		fs, n, problem := scanAppSets(ctx, o, ac, list.Items, now)
		findings = append(findings, fs...)
		if problem != "" {
			problems = append(problems, problem)
			read += ", ApplicationSets unreadable"
		} else {
			read += fmt.Sprintf(", %d ApplicationSets", n)
			if hidden := appSetsHidden(ctx, o); hidden != "" {
				problems = append(problems, hidden)
				read += " (others may be hidden by Argo CD RBAC)"
			}
		}
	}
	if o.Read != nil {
		*o.Read = read
	}
	return findings, problems, nil
}

// appSetsOf returns the ApplicationSet client to use: the given one, else c when it implements AppSetClient.
func appSetsOf(given AppSetClient, c Client) AppSetClient {
	if given != nil {
		return given
	}
	ac, _ := c.(AppSetClient)
	return ac
}

// appSetsHidden returns a problem when CanI says the account may not get every ApplicationSet of the scan's scope:
// argocd-server's List leaves those out silently, so argocd/rollingsync-stalled judged only the ones it may. A CanI
// that cannot be asked says nothing here (as for the applications' preflight).
func appSetsHidden(ctx context.Context, o ScanOptions) string {
	a := AccessOf(o.Access, o.Client)
	if a == nil {
		return ""
	}
	missing, err := CheckAppSets(ctx, a, WatchScope(o.Projects, o.AppNamespace))
	if err != nil || len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the Argo CD account lacks %v: argocd-server leaves the ApplicationSets it may not get out of the list, "+
		"so argocd/rollingsync-stalled judged only the ones it may; add %s to argocd-rbac-cm", missing, policyLines(missing))
}

// scanAppSets lists the ApplicationSets once and judges each with the listed applications (an application a
// possible holder names that the list left out is read with Get). An ApplicationSet list that fails is a problem,
// not a failed scan: the other rules' findings stand.
func scanAppSets(ctx context.Context, o ScanOptions, ac AppSetClient, apps []v1alpha1.Application, now time.Time) ([]syncmedic.Finding, int, string) {
	sets, _, err := listAppSets(ctx, ac, o.Projects, o.AppNamespace)
	if err != nil {
		return nil, 0, fmt.Sprintf("argocd applicationsets unreadable, argocd/rollingsync-stalled skipped: %v", err)
	}
	byNS := map[string]map[string]*v1alpha1.Application{}
	for i := range apps {
		a := &apps[i]
		if byNS[a.Namespace] == nil {
			byNS[a.Namespace] = map[string]*v1alpha1.Application{}
		}
		byNS[a.Namespace][a.Name] = a
	}
	var out []syncmedic.Finding
	for i := range sets {
		as := &sets[i]
		known := byNS[as.Namespace]
		obs := rules.AppSetObservation{Instance: o.Instance, AppSet: as, UIURL: o.UIURL, Apps: map[string]*v1alpha1.Application{}}
		for _, name := range rules.HoldCandidates(as, now, o.Thresholds) {
			if a, ok := known[name]; ok {
				obs.Apps[name] = a
				continue
			}
			name, ns := name, as.Namespace
			if a, err := o.Client.Get(ctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns}); err == nil {
				obs.Apps[name] = a
			}
		}
		out = append(out, rules.RollingSyncStalled(obs, now, o.Thresholds)...)
	}
	return out, len(sets), ""
}
