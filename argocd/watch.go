package argocd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
)

// WatcherOptions configure a Watcher. Client is required; the rest have defaults.
type WatcherOptions struct {
	Client Client
	// Instance names this Argo CD in findings and subjects ("" when there is only one).
	Instance string
	// Projects, Selector and AppNamespace restrict the watched applications (like `argocd app list`).
	Projects     []string
	Selector     string
	AppNamespace string
	// UIURL is the Argo CD UI base URL for links in findings.
	UIURL      string
	Thresholds rules.Thresholds
	// Resync is how often the live hooks of a suspicious application are read again while it stays suspicious
	// (default 30s). Healthy applications are never read, except for the one look of HookLeakCheck.
	Resync time.Duration
	// HookLeakCheck says when to look once, after each finished operation that ran hooks, for a hook left holding
	// argocd.argoproj.io/hook-finalizer (default HookLeakAuto: only on servers whose version can leak it).
	HookLeakCheck rules.HookLeakCheck
	// MinBackoff and MaxBackoff bound the wait before re-opening a dropped watch (defaults 200ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// Fetchers bounds the concurrent live-state reads (default 4); FetchTimeout bounds one read (default 10s: on a
	// cache miss argocd-server asks the controller for a refresh and waits for it).
	Fetchers     int
	FetchTimeout time.Duration
	Log          *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Access answers CanI for the permission preflight at every (re)connect (default: Client, when it implements
	// AccountClient, as APIClient does). AccessRecheck is how often CanI is asked again while the account may not get
	// the watched applications (default 30s).
	Access        AccountClient
	AccessRecheck time.Duration
}

// WatcherStats count what a Watcher did, for metrics and the benchmark.
type WatcherStats struct {
	// Events are watch events received; Evaluations are rule runs reported to the sink.
	Events, Evaluations int64
	// Calls are Argo CD API calls other than Watch, List and Version: the cost of live state (ResourceTree,
	// GetResource). Healthy applications add none, except the one look per finished operation that ran hooks when
	// HookLeakCheck applies to the server.
	Calls int64
	// Reconnects counts re-opened watch streams.
	Reconnects int64
	// Apps is the number of applications held in memory.
	Apps int64
}

// Watcher follows Argo CD applications with ApplicationService.Watch and reports each application's findings to a
// sink whenever its state changes and whenever one of its thresholds passes. It implements syncmedic.Source.
type Watcher struct {
	o     WatcherOptions
	stats struct{ events, evals, calls, reconnects, apps atomic.Int64 }
	in    chan input
	// version is the Argo CD server version, written by the stream goroutine.
	version atomic.Value
	sem     chan struct{}
	// listed is set once the first full list arrived; lastErr is the last stream error (nil while healthy).
	listed  atomic.Bool
	lastErr atomic.Value
	// access answers the permission preflight (nil: no preflight); accessSt is its last conclusion.
	access   AccountClient
	accessMu sync.Mutex
	accessSt accessState
}

var _ syncmedic.Source = (*Watcher)(nil)

// NewWatcher validates o and returns a Watcher.
func NewWatcher(o WatcherOptions) (*Watcher, error) {
	if o.Client == nil {
		return nil, errors.New("argocd watcher: no client")
	}
	if o.Thresholds == (rules.Thresholds{}) {
		o.Thresholds = rules.DefaultThresholds()
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	check, err := rules.ParseHookLeakCheck(string(o.HookLeakCheck))
	if err != nil {
		return nil, fmt.Errorf("argocd watcher: %w", err)
	}
	o.HookLeakCheck = check
	if o.MinBackoff <= 0 {
		o.MinBackoff = 200 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Fetchers <= 0 {
		o.Fetchers = 4
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AccessRecheck <= 0 {
		o.AccessRecheck = 30 * time.Second
	}
	w := &Watcher{o: o, in: make(chan input, 256), sem: make(chan struct{}, o.Fetchers), access: AccessOf(o.Access, o.Client)}
	w.version.Store("")
	return w, nil
}

// Stats returns the counters so far.
func (w *Watcher) Stats() WatcherStats {
	return WatcherStats{Events: w.stats.events.Load(), Evaluations: w.stats.evals.Load(), Calls: w.stats.calls.Load(),
		Reconnects: w.stats.reconnects.Load(), Apps: w.stats.apps.Load()}
}

// Ready returns nil once the watcher has listed the applications, its stream is healthy and the account may get
// the watched applications (see AccessError), else why not.
func (w *Watcher) Ready() error {
	if e, _ := w.lastErr.Load().(errBox); e.err != nil {
		return e.err
	}
	if !w.listed.Load() {
		return errors.New("argocd watcher: applications not listed yet")
	}
	return w.accessDenied()
}

// errBox lets atomic.Value hold a nil error.
type errBox struct{ err error }

// ServerVersion returns the Argo CD version reported by the Version API ("" until known).
func (w *Watcher) ServerVersion() string { return w.version.Load().(string) }

// leakCheck reports whether healthy applications whose last operation ran hooks get their one look for a leftover
// hook finalizer, given the options and the server version known now.
func (w *Watcher) leakCheck() bool { return w.o.HookLeakCheck.Enabled(w.ServerVersion()) }

// Subject returns the sink subject of an application: "argocd/<instance>/<app-namespace>/<app>".
func Subject(instance, appNamespace, app string) string {
	return "argocd/" + instance + "/" + appNamespace + "/" + app
}

// SubjectPrefix is the prefix of every subject a Watcher with this instance reports.
func SubjectPrefix(instance string) string { return "argocd/" + instance + "/" }

// Trigger asks for an immediate re-evaluation of subject (with a fresh read of live state when the application is
// suspicious). Unknown subjects are ignored. It never blocks: when the loop is saturated the hint is dropped, since
// the application is re-evaluated on its next change or threshold anyway.
func (w *Watcher) Trigger(subject string) {
	select {
	case w.in <- input{kind: inTrigger, key: subject}:
	default:
		w.o.Log.Debug("argocd re-evaluation hint dropped: loop busy", "subject", subject)
	}
}

type inputKind int

const (
	inListed inputKind = iota
	inEvent
	inTimer
	inFetched
	inTrigger
)

// input is one thing the evaluation loop reacts to; only the loop touches application state.
type input struct {
	kind  inputKind
	apps  []v1alpha1.Application
	ev    watch.EventType
	app   *v1alpha1.Application
	key   string
	gen   uint64
	hooks []*unstructured.Unstructured
	err   error
	// partial (inListed) says why the list may leave out applications that exist: those are then kept, not gone.
	partial string
}

// Run watches until ctx is cancelled (nil) or the server refuses the watch for good (a syncmedic.Permanent error
// naming the missing permission).
func (w *Watcher) Run(ctx context.Context, sink syncmedic.Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streamErr := make(chan error, 1)
	go func() { streamErr <- w.stream(ctx) }()
	l := &loop{w: w, ctx: ctx, sink: sink, apps: map[string]*appState{}}
	defer l.stopTimers()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-streamErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case in := <-w.in:
			l.handle(in)
		}
	}
}

// send delivers in to the loop unless ctx ends first.
func (w *Watcher) send(ctx context.Context, in input) bool {
	select {
	case w.in <- in:
		return true
	case <-ctx.Done():
		return false
	}
}

// stream keeps a watch open: on every (re)connect it reads the server version, opens the watch, re-lists every
// application (so nothing that happened while disconnected is missed, deletions included), then forwards events.
// A dropped stream is re-opened with exponential backoff; a permission error ends it.
func (w *Watcher) stream(ctx context.Context) error {
	backoff := w.o.MinBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			w.stats.reconnects.Add(1)
		}
		listed, err := w.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		w.lastErr.Store(errBox{err})
		if syncmedic.IsPermanent(err) {
			w.o.Log.Error("argocd watch refused", "instance", w.o.Instance, "error", err)
			return err
		}
		if listed {
			backoff = w.o.MinBackoff
		}
		w.o.Log.Warn("argocd watch interrupted, re-listing", "instance", w.o.Instance, "error", err, "retryIn", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, w.o.MaxBackoff)
	}
}

func (w *Watcher) query() *application.ApplicationQuery {
	q := &application.ApplicationQuery{Projects: w.o.Projects}
	if w.o.Selector != "" {
		q.Selector = &w.o.Selector
	}
	if w.o.AppNamespace != "" {
		q.AppNamespace = &w.o.AppNamespace
	}
	return q
}

// session runs one watch connection; listed reports whether it got as far as a full re-list.
func (w *Watcher) session(ctx context.Context) (listed bool, err error) {
	if v, err := w.o.Client.Version(ctx, &emptypb.Empty{}); err == nil {
		if prev := w.version.Swap(v.GetVersion()); prev != v.GetVersion() {
			w.o.Log.Info("argocd server version", "instance", w.o.Instance, "version", v.GetVersion(),
				"hookLeakCheck", w.o.HookLeakCheck, "lookAfterHookedSyncs", w.leakCheck())
		}
	} else {
		w.o.Log.Debug("argocd version unavailable", "instance", w.o.Instance, "error", err)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := w.preflight(sctx, cancel); err != nil {
		return false, err
	}
	// A resourceVersion makes argocd-server skip the ADDED event it otherwise sends for every application when a
	// watch opens (server/application Watch, v2.14 to v3.6; "0" filters nothing): the List below reads them
	// anyway, and decoding every application twice per (re)connect was a fifth of the watcher's CPU.
	wq := w.query()
	rv := "0"
	wq.ResourceVersion = &rv
	stream, err := w.o.Client.Watch(sctx, wq)
	if err != nil {
		return false, Classify(CallWatch, "(all applications)", err)
	}
	list, err := w.o.Client.List(ctx, w.query())
	if err != nil {
		return false, Classify(CallList, "(all applications)", err)
	}
	if !w.send(ctx, input{kind: inListed, apps: list.Items, partial: w.listPartial(ctx, list)}) {
		return true, nil
	}
	w.listed.Store(true)
	w.lastErr.Store(errBox{})
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(context.Cause(sctx), errAccessGranted) {
				return true, errAccessGranted
			}
			return true, Classify(CallWatch, "(all applications)", err)
		}
		w.stats.events.Add(1)
		app := ev.Application
		if !w.send(ctx, input{kind: inEvent, ev: ev.Type, app: &app}) {
			return true, nil
		}
	}
}

// resourceVersion orders two versions of an object; unparsable versions always count as newer.
func newer(rv, than string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(than, 10, 64)
	if errA != nil || errB != nil {
		return rv != than
	}
	return a > b
}

// fetch reads live hooks for an application in the background and hands the result to the loop.
func (w *Watcher) fetch(ctx context.Context, key string, gen uint64, app *v1alpha1.Application) {
	go func() {
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-w.sem }()
		c := &countingClient{ApplicationClient: w.o.Client, calls: &w.stats.calls}
		fctx, cancel := context.WithTimeout(ctx, w.o.FetchTimeout)
		hooks, err := fetchHooks(fctx, c, app)
		cancel()
		w.send(ctx, input{kind: inFetched, key: key, gen: gen, hooks: hooks, err: err})
	}()
}

// countingClient counts the live-state calls.
type countingClient struct {
	ApplicationClient
	calls *atomic.Int64
}

func (c *countingClient) ResourceTree(ctx context.Context, in *application.ResourcesQuery, opts ...grpcCallOption) (*v1alpha1.ApplicationTree, error) {
	c.calls.Add(1)
	return c.ApplicationClient.ResourceTree(ctx, in, opts...)
}

func (c *countingClient) GetResource(ctx context.Context, in *application.ApplicationResourceRequest, opts ...grpcCallOption) (*application.ApplicationResourceResponse, error) {
	c.calls.Add(1)
	return c.ApplicationClient.GetResource(ctx, in, opts...)
}

func (w *Watcher) String() string { return fmt.Sprintf("argocd watcher %q", w.o.Instance) }
