package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/policy"
)

// argoCDServeOptions are the Argo CD component's flags.
type argoCDServeOptions struct {
	argoCDFlags
	instance  string
	resync    time.Duration
	reads     int
	readTime  time.Duration
	leakCheck string
	// backOff paces the attempts to reach argocd-server (default newConnectBackOff; tests make it quick).
	backOff func() backoff.BackOff
	// fs is serve's flag set: the shared --argocd-* flags may already be defined there (by addLiveFlags), so they
	// are read back from it by name when the component starts.
	fs *pflag.FlagSet
}

// read fills the Argo CD flags from the flag set, whoever defined them.
func (o *argoCDServeOptions) read() error {
	var err error
	str := func(name string, dst *string) {
		if err == nil {
			*dst, err = o.fs.GetString(name)
		}
	}
	flag := func(name string, dst *bool) {
		if err == nil {
			*dst, err = o.fs.GetBool(name)
		}
	}
	str("argocd-server", &o.server)
	str("argocd-token-file", &o.tokenFile)
	flag("argocd-plaintext", &o.plaintext)
	flag("argocd-insecure", &o.insecure)
	flag("argocd-grpc-web", &o.grpcWeb)
	str("argocd-selector", &o.selector)
	str("argocd-app-namespace", &o.appNamespace)
	str("argocd-url", &o.uiURL)
	str("argocd-ca-file", &o.caFile)
	if err == nil {
		o.projects, err = o.fs.GetStringSlice("argocd-project")
	}
	return err
}

func init() {
	o := &argoCDServeOptions{}
	registerServeComponent(serveComponent{
		name: "argocd",
		flags: func(fs *pflag.FlagSet) {
			o.fs = fs
			if fs.Lookup("argocd-server") == nil {
				addArgoCDFlags(fs, &o.argoCDFlags)
			}
			fs.StringVar(&o.instance, "argocd-instance", "", "name of this Argo CD in findings and subjects, when syncmedic watches more than one")
			fs.DurationVar(&o.resync, "argocd-live-resync", 30*time.Second, "how often the live hooks of a suspicious application are read again (healthy applications are never read)")
			fs.IntVar(&o.reads, "argocd-live-reads", 4, "live-state reads of suspicious applications at once (each a ResourceTree call, then a GetResource per hook)")
			fs.DurationVar(&o.readTime, "argocd-live-timeout", 10*time.Second, "how long one live-state read may take (argocd-server answers ResourceTree from the controller's cache; on a miss it asks the controller for a refresh and waits for it); a read cut short is taken again after --argocd-live-resync")
			fs.StringVar(&o.leakCheck, "argocd-hook-leak-check", string(rules.HookLeakAuto), hookLeakCheckHelp)
		},
		start: func(ctx context.Context, d serveDeps) (serveParts, error) { return startArgoCD(ctx, d, o) },
	})
}

// hookLeakCheckHelp documents --argocd-hook-leak-check.
const hookLeakCheckHelp = "when to look once, after each finished sync that ran hooks, for a hook left holding " +
	"argocd.argoproj.io/hook-finalizer (one ResourceTree call per such sync of a healthy application): " +
	"auto = only when the Argo CD server can leak it (v2.14.3, v3.x or later, or a version the Version API does not tell); " +
	"always; never. Other 2.x servers never add the finalizer, and a hook a past v2.14.3 left holding it is still " +
	"reported once it is deleted (the sync waiting on it, or kube/stuck-terminating). The scan command always looks"

func startArgoCD(_ context.Context, d serveDeps, o *argoCDServeOptions) (serveParts, error) {
	if o.fs != nil {
		if err := o.read(); err != nil {
			return serveParts{}, err
		}
	}
	if !o.enabled() {
		return serveParts{}, nil
	}
	leakCheck, err := rules.ParseHookLeakCheck(o.leakCheck)
	if err != nil {
		return serveParts{}, fmt.Errorf("--argocd-hook-leak-check: %w", err)
	}
	if o.reads < 1 {
		return serveParts{}, fmt.Errorf("--argocd-live-reads: %d: give at least 1", o.reads)
	}
	if o.readTime <= 0 {
		return serveParts{}, fmt.Errorf("--argocd-live-timeout: %s: give a positive duration", o.readTime)
	}
	opts := o.clientOptions()
	if err := opts.Validate(); err != nil {
		return serveParts{}, err
	}
	log := d.Log.With("component", "argocd")
	// The watcher and the remedies are built now, on a connection made in the background: an unreachable
	// argocd-server delays the Argo CD part and nothing else.
	conn := &argoConn{}
	w, err := argocd.NewWatcher(argocd.WatcherOptions{
		Client: conn, Instance: o.instance, Projects: o.projects, Selector: o.selector, AppNamespace: o.appNamespace,
		UIURL: o.uiURL, Thresholds: d.Thresholds.ArgoCD, Resync: o.resync, HookLeakCheck: leakCheck, Log: log,
		Fetchers: o.reads, FetchTimeout: o.readTime,
	})
	if err != nil {
		return serveParts{}, err
	}
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: conn, Log: log})
	if err != nil {
		return serveParts{}, err
	}
	if d.Triggers != nil {
		d.Triggers.Handle(argocd.SubjectPrefix(o.instance), w.Trigger)
	}
	if d.Metrics != nil {
		registerWatcherMetrics(d.Metrics, w, o.instance)
	}
	src := &lateSource[syncmedic.Source]{peer: "argocd-server " + opts.ServerAddr, log: log, backOff: o.backOff,
		build: func(ctx context.Context) (syncmedic.Source, error) {
			c, err := argocd.DialContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			conn.set(c)
			return syncmedic.SourceFunc(func(ctx context.Context, sink syncmedic.Sink) error {
				defer func() {
					// A restart dials again; on shutdown the remedies in flight still use the connection while they
					// drain: serveParts.Close closes it after them.
					if ctx.Err() == nil {
						c.Close()
					}
				}()
				if d.Policy != nil {
					// Warn now, not at the first incident, when the account cannot apply what the policy sets to auto.
					pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					remedy.WarnRemedies(pctx, c, nil, d.Policy(), argocd.WatchScope(o.projects, o.appNamespace), log)
					cancel()
				}
				warnAnonymousExtension(ctx, opts, d.Policy, log)
				return runWithAppSets(ctx, sink, w, argocd.NewAppSetPoller(argocd.AppSetPollerOptions{Client: c, Instance: o.instance,
					Projects: o.projects, Namespace: o.appNamespace, UIURL: o.uiURL, Thresholds: d.Thresholds.ArgoCD, Log: log}))
			}), nil
		}}
	ready := func() error { return src.Ready(func(syncmedic.Source) error { return w.Ready() }) }
	closeConn := func() {
		if c := conn.c.Load(); c != nil {
			c.Close()
		}
	}
	return serveParts{Sources: []syncmedic.Source{src}, Remediers: rem.Remediers(), Ready: ready, Close: closeConn}, nil
}

// runWithAppSets runs the application watcher and the ApplicationSet poller (argocd/rollingsync-stalled) together
// until ctx ends or the watcher stops; the poller never stops the watcher, and ends with it.
func runWithAppSets(ctx context.Context, sink syncmedic.Sink, w syncmedic.Source, p syncmedic.Source) error {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(pctx, sink)
	}()
	err := w.Run(ctx, sink)
	cancel()
	<-done
	return err
}

// argoConn is the Argo CD client of serve's watcher and remedies: it forwards to the connection once one is made,
// and until then answers every call with codes.Unavailable, the error of an unreachable server.
type argoConn struct {
	c atomic.Pointer[argocd.APIClient]
}

var (
	_ argocd.Client             = (*argoConn)(nil)
	_ argocd.AccountClient      = (*argoConn)(nil)
	_ argocd.SyncSettingsClient = (*argoConn)(nil)
)

func (a *argoConn) set(c *argocd.APIClient) { a.c.Store(c) }

func (a *argoConn) get() (*argocd.APIClient, error) {
	if c := a.c.Load(); c != nil {
		return c, nil
	}
	return nil, status.Error(codes.Unavailable, "argocd-server: not connected yet")
}

func (a *argoConn) Watch(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (application.ApplicationService_WatchClient, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.Watch(ctx, in, opts...)
}

func (a *argoConn) List(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationList, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.List(ctx, in, opts...)
}

func (a *argoConn) Get(ctx context.Context, in *application.ApplicationQuery, opts ...grpc.CallOption) (*v1alpha1.Application, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, in, opts...)
}

func (a *argoConn) ResourceTree(ctx context.Context, in *application.ResourcesQuery, opts ...grpc.CallOption) (*v1alpha1.ApplicationTree, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.ResourceTree(ctx, in, opts...)
}

func (a *argoConn) GetResource(ctx context.Context, in *application.ApplicationResourceRequest, opts ...grpc.CallOption) (*application.ApplicationResourceResponse, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.GetResource(ctx, in, opts...)
}

func (a *argoConn) PatchResource(ctx context.Context, in *application.ApplicationResourcePatchRequest, opts ...grpc.CallOption) (*application.ApplicationResourceResponse, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.PatchResource(ctx, in, opts...)
}

func (a *argoConn) TerminateOperation(ctx context.Context, in *application.OperationTerminateRequest, opts ...grpc.CallOption) (*application.OperationTerminateResponse, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.TerminateOperation(ctx, in, opts...)
}

func (a *argoConn) Sync(ctx context.Context, in *application.ApplicationSyncRequest, opts ...grpc.CallOption) (*v1alpha1.Application, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.Sync(ctx, in, opts...)
}

func (a *argoConn) GetApplicationSyncWindows(ctx context.Context, in *application.ApplicationSyncWindowsQuery, opts ...grpc.CallOption) (*application.ApplicationSyncWindowsResponse, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.GetApplicationSyncWindows(ctx, in, opts...)
}

func (a *argoConn) Version(ctx context.Context, in *emptypb.Empty, opts ...grpc.CallOption) (*versionpkg.VersionMessage, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.Version(ctx, in, opts...)
}

func (a *argoConn) SyncWithReplaceAllowed(ctx context.Context) (bool, error) {
	c, err := a.get()
	if err != nil {
		return false, err
	}
	return c.SyncWithReplaceAllowed(ctx)
}

func (a *argoConn) CanI(ctx context.Context, in *accountpkg.CanIRequest, opts ...grpc.CallOption) (*accountpkg.CanIResponse, error) {
	c, err := a.get()
	if err != nil {
		return nil, err
	}
	return c.CanI(ctx, in, opts...)
}

// registerWatcherMetrics exposes the watcher's counters: events, live-state API calls (zero for healthy apps),
// reconnects and applications held. With --argocd-instance they carry argocd_instance (not instance, the label
// Prometheus gives every scrape target).
func registerWatcherMetrics(reg prometheus.Registerer, w *argocd.Watcher, instance string) {
	var labels prometheus.Labels
	if instance != "" {
		labels = prometheus.Labels{"argocd_instance": instance}
	}
	counter := func(name, help string, v func(argocd.WatcherStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(w.Stats())) })
	}
	for _, c := range []prometheus.Collector{
		counter("syncmedic_argocd_watch_events_total", "Argo CD application watch events received.", func(s argocd.WatcherStats) int64 { return s.Events }),
		counter("syncmedic_argocd_live_calls_total", "Argo CD API calls made to read live hook state of suspicious applications.", func(s argocd.WatcherStats) int64 { return s.Calls }),
		counter("syncmedic_argocd_watch_reconnects_total", "Argo CD watch streams re-opened after a drop.", func(s argocd.WatcherStats) int64 { return s.Reconnects }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "syncmedic_argocd_applications", Help: "Argo CD applications watched.", ConstLabels: labels},
			func() float64 { return float64(w.Stats().Apps) }),
	} {
		_ = reg.Register(c)
	}
}

// warnAnonymousExtension logs argocd.AnonymousExtensionWarning when argocd-server lets anonymous users invoke the
// extension; a server that cannot be asked is logged at debug level (the extension may not be set up at all).
func warnAnonymousExtension(ctx context.Context, opts argocd.ClientOptions, pol func() *policy.Policy, log *slog.Logger) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	yes, err := argocd.AnonymousMayInvoke(actx, opts, argocd.ExtensionName)
	if err != nil {
		log.Debug("could not ask argocd-server whether anonymous users may invoke the extension", "error", err)
		return
	}
	if !yes {
		log.Info("argocd-server lets no anonymous user invoke the " + argocd.ExtensionName + " extension")
		return
	}
	trustGroups := false
	if pol != nil {
		if p := pol(); p != nil {
			trustGroups = p.TrustProxyGroups
		}
	}
	log.Warn(argocd.AnonymousExtensionWarning(argocd.ExtensionName, trustGroups))
}
