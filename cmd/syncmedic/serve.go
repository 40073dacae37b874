package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/leader"
	"github.com/syncmedic/syncmedic/notify"
	slacknotify "github.com/syncmedic/syncmedic/notify/slack"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
	"github.com/syncmedic/syncmedic/snapshot"
)

func init() { subcommands = append(subcommands, newServeCommand) }

// serveOptions are the flags of `syncmedic serve` that serve.go owns; components add their own.
type serveOptions struct {
	listen          string
	metricsAddr     string
	kubeconfig      string
	policyFile      string
	policyConfigMap string
	policyReload    time.Duration
	stateConfigMap  string
	stateFile       string
	leaderElect     bool
	leaderNamespace string
	leaderID        string
	identity        string
	notify          notifyOptions
	logFormat       string
	logLevel        string
	thresholds      snapshot.Thresholds
	shutdownGrace   time.Duration
	remedyDrain     time.Duration
	readinessWait   time.Duration
	// silenceMaxDuration bounds how long a silence may last (serve_silence.go).
	silenceMaxDuration silenceDuration
}

func newServeCommand() *cobra.Command {
	return serveCommand(&serveOptions{thresholds: snapshot.DefaultThresholds()})
}

// serveCommand is `syncmedic serve` with its flags parsed into o.
func serveCommand(o *serveOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Watch Argo CD and Flux, track incidents, notify and (where the policy allows) fix them",
		Example: `  # in a cluster, with Slack and a policy ConfigMap
  syncmedic serve --policy-configmap syncmedic/syncmedic-policy --state-configmap syncmedic/syncmedic-state \
    --slack-token-file /var/run/secrets/slack/token --slack-channel '#gitops-incidents'
  # outside a cluster: only the Flux event receiver
  syncmedic serve --listen :9292 --log-format text`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", ":9292", "address serving the receivers, the incident API and page (and /healthz, /readyz, /metrics unless --metrics-addr is set)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "address serving /metrics, /healthz and /readyz instead of --listen (the shipped manifests use :9293), so a NetworkPolicy can admit Prometheus there and not to the API and receivers")
	f.StringVar(&o.policyFile, "policy-file", "", "remediation policy YAML file (default: notify every rule, act on none)")
	f.StringVar(&o.policyConfigMap, "policy-configmap", "", "remediation policy ConfigMap as namespace/name (key "+policy.PolicyConfigMapKey+")")
	f.DurationVar(&o.policyReload, "policy-reload-interval", 15*time.Second, "how often the policy file or ConfigMap is re-read (an invalid policy is logged and the last good one kept)")
	f.StringVar(&o.stateConfigMap, "state-configmap", "", "ConfigMap (namespace/name) where open incidents and Slack threads are persisted")
	f.StringVar(&o.stateFile, "state-file", "", "file where incidents are persisted when not using --state-configmap")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader with a Lease: every replica evaluates, only the leader remediates and notifies")
	f.StringVar(&o.leaderNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the Pod's namespace)")
	f.StringVar(&o.leaderID, "leader-election-id", "syncmedic", "name of the leader election Lease")
	f.StringVar(&o.identity, "identity", "", "this replica's name in the Lease and the audit log (default: $POD_NAME, else the host name)")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or text")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&o.readinessWait, "readiness-wait", 30*time.Second, "how long a starting serve waits for its sources before /readyz answers 200 anyway "+
		"(/readyz means this pod can serve the receiver and the incident API; a source outage shows in its body and the metrics); "+
		"a refused token, a missing permission or an untrusted certificate keep a pod that was never ready unready")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "how long to wait for in-flight requests on shutdown")
	f.DurationVar(&o.remedyDrain, "remedy-drain", remedy.DefaultDrain, "how long shutdown lets a remedy in flight finish (a terminate-and-resync between its TerminateOperation and its Sync), "+
		"keeping the leader Lease meanwhile; the pod's terminationGracePeriodSeconds must exceed it (the shipped manifests give 390s)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: the in-cluster service account when running in a Pod)")
	addNotifyFlags(cmd, &o.notify)
	addSilenceFlags(f, o)
	addThresholdFlags(cmd, &o.thresholds)
	for _, c := range serveComponents {
		if c.flags != nil {
			c.flags(f)
		}
	}
	documentEnv(cmd)
	return cmd
}

// newLogger builds the slog logger from --log-format and --log-level, and routes client-go's klog into it.
func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want json or text", format)
	}
	routeKlog(h)
	return slog.New(h).With("app", "syncmedic"), nil
}

// kubeConfig returns the cluster's REST config: --kubeconfig, else in-cluster, else nil (no cluster).
func kubeConfig(o *serveOptions, log *slog.Logger) (*rest.Config, error) {
	if o.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Info("no cluster: neither --kubeconfig nor an in-cluster service account; cluster checks, Kubernetes Events, leader election and the ConfigMap state are off")
		return nil, nil
	}
	return cfg, nil
}

func runServe(ctx context.Context, cmd *cobra.Command, o *serveOptions) error {
	log, err := newLogger(o.logFormat, o.logLevel, cmd.ErrOrStderr())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := o.validateSilences(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	cfg, err := kubeConfig(o, log)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var kube kubernetes.Interface
	if cfg != nil {
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	policy, err := newPolicyHolder(ctx, o, kube, log)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	applyPolicyThresholds(&o.thresholds, policy.Get())
	for _, w := range append(o.thresholds.ArgoCD.Warnings(), o.thresholds.Flux.Warnings()...) {
		log.Warn(w)
	}
	if o.metricsAddr != "" && o.metricsAddr == o.listen {
		return &exitError{code: exitUsage, err: fmt.Errorf("--metrics-addr %s is --listen's address: give another port, or leave --metrics-addr empty to serve /metrics, /healthz and /readyz on --listen", o.metricsAddr)}
	}
	d, err := newDaemon(ctx, o, cfg, kube, policy, log)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := d.run(ctx); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}

// daemon is a configured `syncmedic serve`, ready to run.
type daemon struct {
	o          *serveOptions
	log        *slog.Logger
	reg        *metricsRegistry
	policy     *policyHolder
	elector    *leader.Elector
	dispatcher *notify.Dispatcher
	tracker    *incident.Tracker
	stage      *remedy.RemediationStage
	fixer      *remedy.Fixer  // fixes on demand, once the tracker exists
	slack      *slackReceiver // receives Slack's clicks (nil: buttons off)
	leading    func() bool
	parts      []serveParts
	names      []string
	// failed holds each component's last source failure; ready and beat back /readyz and /healthz.
	failed []*sourceState
	ready  readiness
	beat   *heartbeat
	// restartBackOff paces the restarts of a source that stopped with an error (default newConnectBackOff).
	restartBackOff func() backoff.BackOff
}

func newDaemon(ctx context.Context, o *serveOptions, cfg *rest.Config, kube kubernetes.Interface, holder *policyHolder, log *slog.Logger) (*daemon, error) {
	d := &daemon{o: o, log: log, reg: newMetricsRegistry(), policy: holder, beat: newHeartbeat(time.Now)}
	d.ready.wait, d.ready.start = o.readinessWait, time.Now()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	identity := replicaIdentity(o.identity)
	leading := func() bool { return true }
	if o.leaderElect {
		if kube == nil {
			return nil, errors.New("--leader-elect needs a cluster: give --kubeconfig or run in a Pod")
		}
		ns := o.leaderNamespace
		if ns == "" {
			ns = podNamespace()
		}
		el, err := leader.New(leader.Options{Client: kube, Namespace: ns, Name: o.leaderID, Identity: identity, Log: log})
		if err != nil {
			return nil, err
		}
		d.elector, leading = el, el.IsLeader
	}
	deps := serveDeps{Log: log, Kube: cfg, Metrics: d.reg, Thresholds: o.thresholds, Triggers: &triggers{}, Policy: holder.Get,
		Incidents: func() []incident.Incident {
			if d.tracker == nil {
				return nil
			}
			return d.tracker.Incidents()
		},
		Fix: func(ctx context.Context, id string, req remedy.FixRequest) (remedy.FixResult, error) {
			if d.fixer == nil {
				return remedy.FixResult{}, &remedy.FixError{Code: remedy.FixUnavailable, Msg: "syncmedic is starting", RetryAfter: 5 * time.Second}
			}
			return d.fixer.Fix(ctx, id, req)
		},
		Changes: func() <-chan struct{} {
			if d.tracker == nil {
				ch := make(chan struct{})
				time.AfterFunc(time.Second, func() { close(ch) })
				return ch
			}
			return d.tracker.Changes()
		},
		MayFix: func(inc incident.Incident, c policy.Caller) (bool, string) {
			if d.fixer == nil {
				return false, "syncmedic is starting"
			}
			return d.fixer.MayFix(inc, c)
		},
		OnCall: onCall{tracker: func() *incident.Tracker { return d.tracker }}}
	remediers := syncmedic.Remediers{}
	for _, c := range serveComponents {
		p, err := c.start(ctx, deps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		for a, r := range p.Remediers {
			merged, err := mergeRemedier(remediers[a], r)
			if err != nil {
				return nil, fmt.Errorf("%s: action %s: %w", c.name, a, err)
			}
			remediers[a] = merged
		}
		d.parts, d.names, d.failed = append(d.parts, p), append(d.names, c.name), append(d.failed, &sourceState{})
		if p.contributes() {
			failed, ready := d.failed[len(d.failed)-1], p.Ready
			d.addComponentReady(c.name, func() error {
				if err := failed.get(); err != nil {
					return err
				}
				if ready != nil {
					return ready()
				}
				return nil
			})
		}
	}
	store, err := stateStore(o, kube, log)
	if err != nil {
		return nil, err
	}
	metrics := incident.NewMetrics(d.reg)
	d.dispatcher = notify.NewDispatcher(notify.DispatcherOptions{Log: log, Registerer: d.reg})
	d.stage = remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: remediers, Identity: identity, Log: log, Metrics: remedy.NewMetrics(d.reg), Workers: 4, Drain: o.remedyDrain})
	// A ConfigMap store may be unreachable at start (the apiserver restarting): serve starts anyway, unready, and
	// announces nothing until the stored incidents load. A state file that cannot be read is an error at once.
	d.tracker, err = incident.NewTracker(ctx, incident.TrackerOptions{Store: store, Policy: holder.Get, Publisher: reevaluateAfterRemedies(d.dispatcher, deps.Triggers),
		Remediation: d.stage, Leader: leading, Log: log, Metrics: metrics, LoadLater: o.stateConfigMap != "",
		SilenceMaxDuration: time.Duration(o.silenceMaxDuration)})
	if err != nil {
		return nil, fmt.Errorf("load incidents: %w", err)
	}
	d.fixer = remedy.NewFixer(d.stage, d.tracker)
	if o.stateConfigMap != "" {
		d.addComponentReady("state", func() error {
			if err := d.tracker.StoreError(); err != nil {
				return fmt.Errorf("cannot load the stored incidents from ConfigMap %s: %w", o.stateConfigMap, err)
			}
			return nil
		})
	}
	o.notify.log, o.notify.policy, d.leading = log, holder.Get, leading
	dests, err := o.notify.destinations(d.tracker, kube, identity)
	if err != nil {
		return nil, err
	}
	actions := slackActions{fix: deps.Fix, onCall: deps.OnCall, policy: holder.Get, incidents: deps.Incidents, log: log}
	if d.slack, err = o.notify.slackInteractivity(ctx, actions, log); err != nil {
		return nil, err
	}
	for _, dest := range dests {
		d.dispatcher.Add(notify.Durable(dest, d.tracker))
	}
	d.tracker.ResumeDelivery(ctx, destNames(dests)...)
	log.Info("notifiers", "destinations", destNames(dests))
	return d, nil
}

// addComponentReady adds a component to /readyz and to the gauge syncmedic_component_ready{component}, 1 while
// ready returns nil: a source outage never fails readiness once the pod serves, so the metric (and the
// PrometheusRule's SyncmedicComponentNotReady) is where it shows.
func (d *daemon) addComponentReady(name string, ready func() error) {
	d.ready.add(name, ready)
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "syncmedic_component_ready",
		Help:        "1 while the component (argocd, flux, kube, ui, state) works, else 0; /readyz says why.",
		ConstLabels: prometheus.Labels{"component": name},
	}, func() float64 {
		if ready() != nil {
			return 0
		}
		return 1
	}))
}

func (d *daemon) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	for i, p := range d.parts {
		for _, s := range p.Sources {
			goRun(d.names[i], func(ctx context.Context) error { d.runSource(ctx, i, s); return nil })
		}
		d.log.Info("component started", "component", d.names[i], "sources", len(p.Sources), "handlers", sortedKeys(p.Handlers))
	}
	goRun("notify", func(ctx context.Context) error { d.dispatcher.Run(ctx); return nil })
	// The Lease is kept until the remedies in flight have finished and recorded their result (remedy.Run drains them
	// for up to --remedy-drain): a new leader must not start while a remedy of this one is between two writes.
	leadCtx, endLead := context.WithCancel(context.WithoutCancel(ctx))
	defer endLead()
	goRun("remediation", func(ctx context.Context) error { d.stage.Run(ctx); endLead(); return nil })
	goRun("silences", func(ctx context.Context) error { d.tracker.Run(ctx); return nil })
	goRun("policy", d.policy.reload)
	// Note takes the tracker's lock, which every evaluation, notification and remedy goes through.
	goRun("heartbeat", func(ctx context.Context) error { d.beat.run(ctx, func() { d.tracker.Note("", "") }); return nil })
	if d.elector != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.elector.Run(leadCtx) // it returns nil, once leadCtx ends
		}()
	}
	if d.slack != nil && d.slack.socket != nil {
		goRun("slack socket mode", func(ctx context.Context) error { whileLeading(ctx, d.leading, d.slack.socket, d.log); return nil })
	}
	// The receiver's limits (flux/limits.go) bound every request on --listen and --metrics-addr, so a slow client cannot
	// hold a connection.
	api, ops := d.mux()
	listen := func(addr string, h http.Handler) {
		srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: flux.ReadHeaderTimeout,
			ReadTimeout: flux.ReadTimeout, WriteTimeout: flux.WriteTimeout, IdleTimeout: flux.IdleTimeout}
		goRun("http "+addr, func(ctx context.Context) error { return serveHTTP(ctx, srv, d.o.shutdownGrace) })
	}
	listen(d.o.listen, api)
	if ops != nil {
		listen(d.o.metricsAddr, ops)
	}
	d.log.Info("serving", "listen", d.o.listen, "metricsAddr", d.o.metricsAddr, "components", strings.Join(d.names, ","), "leaderElection", d.elector != nil)
	<-ctx.Done()
	cancel(nil)
	wg.Wait()
	for _, p := range d.parts {
		if p.Close != nil {
			p.Close()
		}
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// mux returns the handlers of --listen (the receivers, the incident API and page) and of --metrics-addr (/metrics,
// /healthz, /readyz); without --metrics-addr, ops is nil and api serves both.
func (d *daemon) mux() (api, ops *http.ServeMux) {
	mux := http.NewServeMux()
	health := mux
	if d.o.metricsAddr != "" {
		health = http.NewServeMux()
	}
	health.HandleFunc("/healthz", d.beat.healthz)
	health.Handle("/readyz", &d.ready)
	health.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg.Registry}))
	for _, p := range d.parts {
		for path, h := range p.Handlers {
			mux.Handle(path, h)
		}
	}
	if d.slack != nil && d.slack.handler != nil {
		mux.Handle(slacknotify.InteractionsPath, d.slack.handler)
	}
	if health == mux {
		return mux, nil
	}
	return mux, health
}

// runSource runs s until ctx ends. When s stops with an error, /readyz shows the error under the component's name
// and s runs again after a backoff: one source failing stops neither the others nor the receiver.
func (d *daemon) runSource(ctx context.Context, i int, s syncmedic.Source) {
	newBackOff := d.restartBackOff
	if newBackOff == nil {
		newBackOff = newConnectBackOff
	}
	b := backoff.WithContext(newBackOff(), ctx)
	for {
		started := time.Now()
		err := s.Run(ctx, d.tracker)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped")
		}
		if time.Since(started) > connectMaxInterval {
			b.Reset() // it ran for a while: this is a new failure, not the same one again
		}
		wait := b.NextBackOff()
		err = fmt.Errorf("stopped, restarting in %s: %w", wait.Round(time.Millisecond), err)
		d.failed[i].set(err)
		d.log.Error("source stopped", "component", d.names[i], "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		d.failed[i].set(nil)
	}
}

func serveHTTP(ctx context.Context, srv *http.Server, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return srv.Shutdown(sctx)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func replicaIdentity(flag string) string {
	if flag != "" {
		return flag
	}
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	h, err := os.Hostname()
	if err != nil {
		return "syncmedic"
	}
	return h
}

// podNamespace is the namespace of the service account's Pod, or "default" outside a Pod.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "default"
}

// remedyRecheck is when, after a remedy changed something, its subject is evaluated again (besides at once).
var remedyRecheck = []time.Duration{2 * time.Second, 10 * time.Second}

// reevaluateAfterRemedies forwards the tracker's events to next and, when a remedy changed something (an applied
// attempt that succeeded with Changed), asks the subject's component to evaluate it again at once: a removed hook
// finalizer or a terminated operation need not show in the Application object, and the incident would otherwise
// stay open until the next live-state read (--argocd-live-resync). Subjects no component owns are ignored.
func reevaluateAfterRemedies(next incident.Publisher, t *triggers) incident.Publisher {
	return incident.PublisherFunc(func(ev incident.Event) {
		next.Publish(ev)
		if a := ev.Attempt; ev.Kind == incident.EventRemediated && a != nil && a.Changed && a.Result == incident.ResultSucceeded {
			subject := ev.Incident.Subject
			t.Fire(subject)
			// The controllers act on the change a moment later (the garbage collector deletes the Job whose last
			// finalizer went, the application-controller starts the sync): look again once they have had time to.
			for _, after := range remedyRecheck {
				time.AfterFunc(after, func() { t.Fire(subject) })
			}
		}
	})
}
