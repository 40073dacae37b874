package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/syncmedic/syncmedic"
)

// DefaultStuckKinds are the resources (resource.group, as kubectl names them) checked for being stuck terminating
// unless ScannerOptions.Kinds says otherwise.
var DefaultStuckKinds = []string{
	"jobs.batch", "workflows.argoproj.io", "persistentvolumeclaims",
	"validatingwebhookconfigurations.admissionregistration.k8s.io", "mutatingwebhookconfigurations.admissionregistration.k8s.io",
}

// Resources the scanner always watches (when the cluster serves them).
var (
	validatingWebhooksGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	mutatingWebhooksGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	servicesGVR           = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	namespacesGVR         = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	endpointSlicesGVR     = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	workflowsGVR          = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
)

// ScannerOptions configure a Scanner.
type ScannerOptions struct {
	// Config reaches the cluster's API server.
	Config *rest.Config
	// Cluster names the cluster in the subject ("kube/<cluster>"); empty means "default".
	Cluster string
	// Kinds are the resources checked for being stuck terminating ("jobs.batch", "persistentvolumeclaims", …);
	// empty means DefaultStuckKinds. Kinds the cluster does not serve are skipped with a log line.
	Kinds []string
	// Thresholds are the rule thresholds; zero values take DefaultThresholds.
	Thresholds Thresholds
	// MinInterval spaces evaluations during bursts of changes; zero means 200ms.
	MinInterval time.Duration
	// Log receives one line per skipped kind and evaluation failures; nil discards.
	Log *slog.Logger
	// ArgoCDRulesRun says that the argocd rules judge the cluster's Argo CD hooks and Applications (see
	// Inventory.ArgoCDRulesRun); false (the default) keeps Argo CD's finalizers in kube/stuck-terminating.
	ArgoCDRulesRun bool
	// Now is the clock rules evaluate against; nil means time.Now.
	Now func() time.Time
}

// Scanner is the live cluster-checks source: informers over the configured kinds, webhook configurations with their
// Services, EndpointSlices and Namespaces, and Argo Workflows. It evaluates the kube rules over the whole inventory on every
// change (at most once per MinInterval) and when the next threshold passes (one timer, not polling), and reports
// each evaluation under "kube/<cluster>".
type Scanner struct {
	opts    ScannerOptions
	log     *slog.Logger
	dyn     dynamic.Interface
	factory dynamicinformer.DynamicSharedInformerFactory
	stuck   []schema.GroupVersionResource
	watched map[schema.GroupVersionResource]toolscache.SharedIndexInformer
	dirty   chan struct{}
	synced  atomic.Bool

	downSince map[string]BackendDown // webhook backends seen down, by Service (trackBackends)
	seenUp    map[string]time.Time   // when each webhook backend was last seen up, by Service (trackBackends)
}

var _ syncmedic.Source = (*Scanner)(nil)

// NewScanner resolves the kinds through discovery and prepares the informers; nothing is watched until Run.
func NewScanner(o ScannerOptions) (*Scanner, error) {
	if o.Config == nil {
		return nil, errors.New("kube scanner: a Kubernetes REST config is required")
	}
	o = withDefaults(o)
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("source", "kube")
	dyn, err := dynamic.NewForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("kube scanner: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("kube scanner: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	s := &Scanner{opts: o, log: log, dyn: dyn, factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		watched: map[schema.GroupVersionResource]toolscache.SharedIndexInformer{}, dirty: make(chan struct{}, 1)}
	for _, k := range o.Kinds {
		gr := schema.ParseGroupResource(strings.TrimSpace(k))
		gvr, err := mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			log.Info("kind not served by the cluster; not watched", "kind", k, "error", err.Error())
			continue
		}
		s.stuck = append(s.stuck, gvr)
	}
	for _, gvr := range append([]schema.GroupVersionResource{validatingWebhooksGVR, mutatingWebhooksGVR, servicesGVR, endpointSlicesGVR, namespacesGVR, workflowsGVR}, s.stuck...) {
		if _, err := mapper.KindFor(gvr); err != nil {
			log.Info("resource not served by the cluster; not watched", "resource", gvr.String())
			continue
		}
		if gvr == namespacesGVR && !mayWatch(o.Config, gvr, log) {
			continue
		}
		s.watch(gvr)
	}
	return s, nil
}

// mayWatch asks the apiserver whether these credentials may list and watch gvr cluster-wide. Namespaces were added
// to the role after the other kinds: an older ClusterRole without them must not keep the informers from syncing (no
// check would run at all), so without the grant they are not watched and the findings say Namespaces were not
// read. When the question itself fails, the answer is yes (the watch then says what is wrong).
func mayWatch(cfg *rest.Config, gvr schema.GroupVersionResource, log *slog.Logger) bool {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, verb := range []string{"list", "watch"} {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}}}, metav1.CreateOptions{})
		if err != nil {
			return true
		}
		if !review.Status.Allowed {
			log.Info("resource not readable with these credentials; not watched (grant get, list, watch to read it)", "resource", gvr.String(), "verb", verb)
			return false
		}
	}
	return true
}

func withDefaults(o ScannerOptions) ScannerOptions {
	if o.Cluster == "" {
		o.Cluster = "default"
	}
	if len(o.Kinds) == 0 {
		o.Kinds = DefaultStuckKinds
	}
	def := DefaultThresholds()
	if o.Thresholds.Terminating == 0 {
		o.Thresholds.Terminating = def.Terminating
	}
	if o.Thresholds.WebhookBackend == 0 {
		o.Thresholds.WebhookBackend = def.WebhookBackend
	}
	if o.Thresholds.ArtifactGC == 0 {
		o.Thresholds.ArtifactGC = def.ArtifactGC
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

func (s *Scanner) watch(gvr schema.GroupVersionResource) {
	if _, ok := s.watched[gvr]; ok {
		return
	}
	inf := s.factory.ForResource(gvr).Informer()
	keepLastWrite := gvr == endpointSlicesGVR // the webhook rule dates an outage from the slice's last write
	_ = inf.SetTransform(func(o interface{}) (interface{}, error) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			trimManagedFields(u, keepLastWrite)
		}
		return o, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { s.markDirty() },
		UpdateFunc: func(_, _ interface{}) { s.markDirty() },
		DeleteFunc: func(interface{}) { s.markDirty() },
	})
	s.watched[gvr] = inf
}

// trimManagedFields drops u's managed fields, which the rules do not read, to save memory; with keepLastWrite it
// keeps the newest entry's manager, operation and time (not its field set), so LastWrite still answers.
func trimManagedFields(u *unstructured.Unstructured, keepLastWrite bool) {
	var last []metav1.ManagedFieldsEntry
	if keepLastWrite {
		for _, e := range u.GetManagedFields() {
			if e.Time != nil && (last == nil || e.Time.After(last[0].Time.Time)) {
				last = []metav1.ManagedFieldsEntry{{Manager: e.Manager, Operation: e.Operation, APIVersion: e.APIVersion, Time: e.Time}}
			}
		}
	}
	u.SetManagedFields(last)
}

func (s *Scanner) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// Subject is the subject the scanner reports under.
func (s *Scanner) Subject() string { return "kube/" + s.opts.Cluster }

// Trigger asks for an evaluation now; it returns at once.
func (s *Scanner) Trigger(string) { s.markDirty() }

// Ready returns nil once the informers have synced.
func (s *Scanner) Ready() error {
	if !s.synced.Load() {
		return errors.New("kube scanner: informers not synced yet")
	}
	return nil
}

// Watched lists the resources the scanner watches, sorted, for logs.
func (s *Scanner) Watched() []string {
	var out []string
	for gvr := range s.watched {
		out = append(out, gvr.String())
	}
	sort.Strings(out)
	return out
}

// Run watches until ctx is cancelled, reporting every evaluation to sink.
func (s *Scanner) Run(ctx context.Context, sink syncmedic.Sink) error {
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	for gvr, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kube scanner: %s did not sync", gvr)
		}
	}
	s.synced.Store(true)
	s.log.Info("kube scanner synced", "watched", s.Watched())
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.dirty:
		case <-timer.C:
		}
		next := s.evaluate(ctx, sink)
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		if !next.IsZero() {
			timer.Reset(next.Sub(s.opts.Now()))
		}
		select { // space evaluations during bursts
		case <-ctx.Done():
			return nil
		case <-time.After(s.opts.MinInterval):
		}
	}
}

// trackBackends records since when each webhook backend has been down, and forgets the ones that recovered, so a
// rollout that leaves a webhook without ready endpoints for a few seconds starts its own clock instead of inheriting
// the configuration's age. A backend this scanner saw up is dated from the evaluation that first saw it down; one
// that was down when the scanner first looked, from its objects' own evidence (BackendsDown), else from then.
// Evaluations run one at a time, so no lock is needed.
func (s *Scanner) trackBackends(inv Inventory, now time.Time) map[string]BackendDown {
	down, up := BackendsDown(inv)
	if s.downSince == nil {
		s.downSince, s.seenUp = map[string]BackendDown{}, map[string]time.Time{}
	}
	for _, key := range up {
		s.seenUp[key] = now
	}
	for key := range s.downSince {
		if _, ok := down[key]; !ok {
			delete(s.downSince, key) // no longer called by a failing-closed webhook, or no longer listed
		}
	}
	for key := range s.seenUp {
		if _, ok := down[key]; !ok && !slices.Contains(up, key) {
			delete(s.seenUp, key)
		}
	}
	for key, evidence := range down {
		if _, ok := s.downSince[key]; ok {
			continue
		}
		at := now.UTC().Format(time.RFC3339)
		switch lastUp, wasUp := s.seenUp[key]; {
		case wasUp:
			evidence = BackendDown{Since: now, Evidence: "first seen down by this scanner at " + at +
				" (up at its evaluation of " + lastUp.UTC().Format(time.RFC3339) + ")"}
		case evidence.Since.IsZero() || evidence.Since.After(now):
			evidence = BackendDown{Since: now, Evidence: "first seen down by this scanner at " + at +
				" (down when it started watching; nothing older dates it)"}
		}
		s.downSince[key] = evidence
	}
	out := make(map[string]BackendDown, len(s.downSince))
	for k, v := range s.downSince {
		out[k] = v
	}
	return out
}

// evaluate reports one evaluation and returns when the next threshold passes (zero: none pending).
func (s *Scanner) evaluate(ctx context.Context, sink syncmedic.Sink) time.Time {
	now := s.opts.Now()
	inv := s.inventory()
	inv.BackendDownSince = s.trackBackends(inv, now)
	inv.ArgoCDRulesRun = s.opts.ArgoCDRulesRun
	findings := Evaluate(inv, now, s.opts.Thresholds)
	s.log.Debug("evaluated cluster", "subject", s.Subject(), "findings", len(findings))
	sink.Observe(ctx, s.Subject(), findings)
	return NextThreshold(inv, now, s.opts.Thresholds)
}
