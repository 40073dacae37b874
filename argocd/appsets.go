package argocd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/applicationset"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// AppSetClient is the part of Argo CD's ApplicationSetService syncmedic calls; APIClient satisfies it.
type AppSetClient interface {
	ListApplicationSets(ctx context.Context, in *applicationset.ApplicationSetListQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationSetList, error)
}

// listAppSets lists the ApplicationSets of the given projects and namespace ("" for argocd-server's own).
// complete is false when argocd-server answered before its informer had read the ApplicationSets (the list has no
// resourceVersion then: it serves before its cache has synced).
func listAppSets(ctx context.Context, c AppSetClient, projects []string, namespace string) (sets []v1alpha1.ApplicationSet, complete bool, err error) {
	list, err := c.ListApplicationSets(ctx, &applicationset.ApplicationSetListQuery{Projects: projects, AppsetNamespace: namespace})
	if err != nil {
		return nil, false, Classify(CallListAppSets, "(all applicationsets)", err)
	}
	return list.Items, list.ResourceVersion != "", nil
}

// AppSetSubject returns the sink subject of an ApplicationSet: "argocd/<instance>/applicationset/<namespace>/<name>".
func AppSetSubject(instance, namespace, name string) string {
	return SubjectPrefix(instance) + "applicationset/" + namespace + "/" + name
}

// AppSetPollerOptions configure an AppSetPoller; Client is required.
type AppSetPollerOptions struct {
	// Client lists the ApplicationSets and gets the Applications that may hold a rollout.
	Client interface {
		AppSetClient
		Get(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.Application, error)
	}
	Instance string
	// Projects and Namespace restrict the ApplicationSets listed (Namespace "" is argocd-server's own namespace).
	Projects   []string
	Namespace  string
	UIURL      string
	Thresholds rules.Thresholds
	// Period is how often the ApplicationSets are listed (default 1m): argocd-server has no ApplicationSet watch, and
	// a rollout is judged on a threshold of tens of minutes.
	Period time.Duration
	// Access answers CanI `applicationsets, get` (default: Client, when it implements AccountClient, as APIClient
	// does).
	Access AccountClient
	Log    *slog.Logger
	Now    func() time.Time
}

// AppSetPoller lists ApplicationSets through argocd-server every Period and reports argocd/rollingsync-stalled for
// each one. It reads an Application only when its ApplicationSet's status already names it as a possible holder
// (rules.HoldCandidates), so a rollout that progresses or is complete costs one List per period and nothing more. It
// implements syncmedic.Source.
type AppSetPoller struct {
	o AppSetPollerOptions
	// reported are the subjects of the last poll, so an ApplicationSet that is gone is reported gone.
	reported map[string]bool
	access   AccountClient
	// hidden is true while the last CanI found the account may not get every ApplicationSet (or could not be asked).
	hidden bool
}

var _ syncmedic.Source = (*AppSetPoller)(nil)

// NewAppSetPoller fills o's defaults.
func NewAppSetPoller(o AppSetPollerOptions) *AppSetPoller {
	if o.Thresholds == (rules.Thresholds{}) {
		o.Thresholds = rules.DefaultThresholds()
	}
	if o.Period <= 0 {
		o.Period = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &AppSetPoller{o: o, reported: map[string]bool{}, access: AccessOf(o.Access, o.Client)}
}

// Run polls until ctx ends. A failed list is logged and tried again at the next period: it never stops the rest of
// the Argo CD part.
func (p *AppSetPoller) Run(ctx context.Context, sink syncmedic.Sink) error {
	t := time.NewTicker(p.o.Period)
	defer t.Stop()
	for {
		if err := p.Poll(ctx, sink); err != nil && ctx.Err() == nil {
			p.o.Log.Warn("argocd applicationsets unreadable, argocd/rollingsync-stalled skipped until the next poll", "instance", p.o.Instance, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll lists the ApplicationSets once, reports each one's findings, and reports gone the ones of the last poll that
// are no longer listed, unless the list may be partial: argocd-server answered before it had read them all, or the
// account may not get every ApplicationSet (mayGetAll).
//
// CanI is asked before the list and again after it: RBAC may change while the list is read, and only a "yes" on
// both sides proves the list left out nothing the account may not get (a "no" turning "yes" meanwhile would
// otherwise pass a list still filtered by the old policy, and a "yes" turning "no" a list filtered by the new one).
func (p *AppSetPoller) Poll(ctx context.Context, sink syncmedic.Sink) error {
	before := p.mayGetAll(ctx)
	sets, complete, err := listAppSets(ctx, p.o.Client, p.o.Projects, p.o.Namespace)
	if err != nil {
		return err
	}
	if complete && (!before || !p.mayGetAll(ctx)) {
		complete = false
	}
	now := p.o.Now()
	seen := make(map[string]bool, len(sets))
	for i := range sets {
		as := &sets[i]
		subject := AppSetSubject(p.o.Instance, as.Namespace, as.Name)
		seen[subject] = true
		obs := rules.AppSetObservation{Instance: p.o.Instance, AppSet: as, UIURL: p.o.UIURL, Apps: p.candidates(ctx, as, now)}
		sink.Observe(ctx, subject, rules.RollingSyncStalled(obs, now, p.o.Thresholds))
	}
	if !complete {
		// What it leaves out may exist: kept for the next poll, neither reported gone nor evaluated.
		for subject := range p.reported {
			seen[subject] = true
		}
		p.reported = seen
		return nil
	}
	for subject := range p.reported {
		if !seen[subject] {
			syncmedic.ReportGone(ctx, sink, subject)
		}
	}
	p.reported = seen
	return nil
}

// mayGetAll asks CanI whether the account may get every ApplicationSet of the poller's scope: argocd-server's List
// silently leaves out the others, so a list without one is no proof it is gone. A "no", or a CanI that cannot be
// asked, makes the poll partial; the first such poll logs why at Warn, the first one after it at Info.
func (p *AppSetPoller) mayGetAll(ctx context.Context) bool {
	if p.access == nil {
		return true
	}
	missing, err := CheckAppSets(ctx, p.access, WatchScope(p.o.Projects, p.o.Namespace))
	if err == nil && len(missing) == 0 {
		if p.hidden {
			p.o.Log.Info("argocd applicationsets readable again: ApplicationSets no longer listed are reported gone", "instance", p.o.Instance)
		}
		p.hidden = false
		return true
	}
	if !p.hidden {
		if err != nil {
			p.o.Log.Warn("argocd applicationset access unverified: none is reported gone until CanI answers", "instance", p.o.Instance, "error", err)
		} else {
			p.o.Log.Warn("argocd account may not get every applicationset: argocd-server leaves those out of the list, so none is reported gone until it may",
				"instance", p.o.Instance, "missing", fmt.Sprint(missing), "add", policyLines(missing))
		}
	}
	p.hidden = true
	return false
}

// candidates gets the Applications that may hold the rollout. One that cannot be read is left out: the rule then
// claims nothing about it.
func (p *AppSetPoller) candidates(ctx context.Context, as *v1alpha1.ApplicationSet, now time.Time) map[string]*v1alpha1.Application {
	names := rules.HoldCandidates(as, now, p.o.Thresholds)
	if len(names) == 0 {
		return nil
	}
	apps := make(map[string]*v1alpha1.Application, len(names))
	for _, name := range names {
		name, ns := name, as.Namespace
		app, err := p.o.Client.Get(ctx, &application.ApplicationQuery{Name: &name, AppNamespace: &ns})
		if err != nil {
			p.o.Log.Warn("argocd application of an applicationset unreadable", "instance", p.o.Instance, "applicationset", as.Namespace+"/"+as.Name, "app", name, "error", err)
			continue
		}
		apps[name] = app
	}
	return apps
}
