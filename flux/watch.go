package flux

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
)

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Config reaches the cluster's API server.
	Config *rest.Config
	// Namespaces limits the HelmReleases watched; empty watches every namespace.
	Namespaces []string
	// Thresholds are the rule thresholds; zero values take DefaultThresholds.
	Thresholds Thresholds
	// Log receives evaluation lines at debug level; nil discards.
	Log *slog.Logger
	// Now is the clock rules evaluate against; nil means time.Now.
	Now func() time.Time
	// ControllerDeployment is helm-controller's Deployment, whose image tag gives the version advisories; zero
	// means DefaultControllerDeployment. Reading it is best effort.
	ControllerDeployment types.NamespacedName
	// APIVersion is the HelmRelease API version to watch, one of ReleaseAPIVersions; empty asks the apiserver
	// (ServedAPIVersion) for the newest one it serves, and NewWatcher fails with ErrNoHelmReleaseAPI when it serves
	// none. Objects of every version are read into the v2 Go types (AddReleaseTypes).
	APIVersion string
	// ReadHelmStorage lets the watcher read Helm's release Secrets (owner=helm, name=<release>) of a release whose
	// Ready is Unknown past its action's timeout, as evidence for flux/helmrelease-ready-unknown. Off, it reads no
	// Secret (the shipped role grants none) and the finding says the storage was not read.
	ReadHelmStorage bool
}

// Watcher is the live Flux source: an informer over HelmReleases (through the newest API version the cluster serves:
// v2, or v2beta2 on Flux 2.2, or v2beta1) and the HelmRelease CRD. It evaluates the Flux rules for a release on every change of the release or of one of its dependencies, when Trigger asks, and
// when a threshold is crossed (a per-object timer, not polling), and reports each evaluation under
// "flux/<namespace>/<name>"; the CRD's storedVersions are reported under "flux/crd/<name>".
type Watcher struct {
	opts    WatcherOptions
	log     *slog.Logger
	cache   cache.Cache
	direct  client.Client // uncached reads (the controller version, dependsOn readyExpr)
	queue   workqueue.TypedDelayingInterface[watchKey]
	version *versionReader
	synced  atomic.Bool
	// apiVersion is the HelmRelease API version watched; unserved holds why it is no longer the right one (the CRD
	// stopped serving it), for Ready.
	apiVersion string
	unserved   atomic.Pointer[string]
}

// watchKey names what one evaluation covers: a HelmRelease, or the CRD.
type watchKey struct {
	crd bool
	nn  types.NamespacedName
}

func (k watchKey) subject() string {
	if k.crd {
		return CRDSubject(k.nn.Name)
	}
	return ReleaseSubject(k.nn.Namespace, k.nn.Name)
}

const dependsOnIndex = "syncmedic.spec.dependsOn"

var _ syncmedic.Source = (*Watcher)(nil)

// NewWatcher builds the informer cache; nothing is watched until Run.
func NewWatcher(o WatcherOptions) (*Watcher, error) {
	if o.Config == nil {
		return nil, errors.New("flux watcher: a Kubernetes REST config is required")
	}
	def := DefaultThresholds()
	if o.Thresholds.StaleStatus == 0 {
		o.Thresholds.StaleStatus = def.StaleStatus
	}
	if o.Thresholds.DependencyNotReady == 0 {
		o.Thresholds.DependencyNotReady = def.DependencyNotReady
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.APIVersion == "" {
		v, err := ServedAPIVersion(o.Config)
		if err != nil {
			return nil, fmt.Errorf("flux watcher: %w", err)
		}
		o.APIVersion = v
	}
	scheme := runtime.NewScheme()
	if err := AddReleaseTypes(scheme, o.APIVersion); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if o.ControllerDeployment.Name == "" {
		o.ControllerDeployment = DefaultControllerDeployment
	}
	direct, err := client.New(o.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("flux watcher: %w", err)
	}
	c, err := cache.New(o.Config, namespaced(cache.Options{
		Scheme:           scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&apiextensionsv1.CustomResourceDefinition{}: {Field: fields.OneTermEqualSelector("metadata.name", CRDName)},
		},
	}, o.Namespaces))
	if err != nil {
		return nil, fmt.Errorf("flux watcher: %w", err)
	}
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[watchKey]{Name: "flux-helmreleases"})
	return &Watcher{opts: o, log: log.With("source", "flux"), cache: c, direct: direct, queue: q,
		version: &versionReader{c: direct, key: o.ControllerDeployment}, apiVersion: o.APIVersion}, nil
}

// APIVersion is the HelmRelease API version the watcher reads (e.g. "v2beta2" on Flux 2.2).
func (w *Watcher) APIVersion() string { return w.apiVersion }

// releaseGVK is the HelmRelease kind at the watched API version.
func (w *Watcher) releaseGVK() schema.GroupVersionKind {
	return ReleaseGroupVersion(w.apiVersion).WithKind(helmv2.HelmReleaseKind)
}

// Trigger asks for an immediate evaluation of a subject ("flux/<namespace>/<name>" or "flux/crd/<name>"); other
// subjects are ignored. It returns at once.
func (w *Watcher) Trigger(subject string) {
	parts := strings.SplitN(subject, "/", 3)
	if len(parts) != 3 || parts[0] != "flux" || parts[1] == "" || parts[2] == "" {
		return
	}
	if parts[1] == "crd" && parts[2] == CRDName {
		w.queue.Add(watchKey{crd: true, nn: types.NamespacedName{Name: CRDName}})
		return
	}
	w.queue.Add(watchKey{nn: types.NamespacedName{Namespace: parts[1], Name: parts[2]}})
}

// Ready returns nil once the informers have synced, and an error again when the HelmRelease CRD stops serving the
// API version watched (nothing more would be read).
func (w *Watcher) Ready() error {
	if why := w.unserved.Load(); why != nil {
		return errors.New(*why)
	}
	if !w.synced.Load() {
		return errors.New("flux watcher: informers not synced yet")
	}
	return nil
}

// crdChanged queues the CRD's evaluation and checks that the CRD still serves the API version watched: a Flux
// upgrade can remove it (Flux 2.7 removes v2beta1), and a newer one the watcher could use needs a restart.
func (w *Watcher) crdChanged(o interface{}, deleted bool) {
	w.queue.Add(watchKey{crd: true, nn: types.NamespacedName{Name: CRDName}})
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return
	}
	served := CRDObservationOf(crd).Served
	if deleted {
		served = nil
	}
	switch newest := NewestServed(served); {
	case !slices.Contains(served, w.apiVersion):
		why := fmt.Sprintf("flux watcher: the cluster no longer serves helm.toolkit.fluxcd.io/%s HelmReleases (CRD %s serves %v): restart syncmedic to watch the version it serves", w.apiVersion, CRDName, served)
		if deleted {
			why = fmt.Sprintf("flux watcher: CRD %s was deleted: %v", CRDName, ErrNoHelmReleaseAPI)
		}
		if prev := w.unserved.Swap(&why); prev == nil || *prev != why {
			w.log.Error(why)
		}
	case newest != w.apiVersion:
		w.unserved.Store(nil)
		w.log.Info("the HelmRelease CRD now serves a newer API version; restart syncmedic to watch it (the objects read are the same)", "watching", w.apiVersion, "newest", newest)
	default:
		w.unserved.Store(nil)
	}
}

// Run watches until ctx is cancelled, reporting every evaluation to sink.
func (w *Watcher) Run(ctx context.Context, sink syncmedic.Sink) error {
	defer w.queue.ShutDown()
	if err := w.cache.IndexField(ctx, &helmv2.HelmRelease{}, dependsOnIndex, dependsOnKeys); err != nil {
		return fmt.Errorf("flux watcher: indexing %s HelmReleases (is the HelmRelease CRD installed?): %w", ReleaseGroupVersion(w.apiVersion), err)
	}
	hrInf, err := w.cache.GetInformer(ctx, &helmv2.HelmRelease{})
	if err != nil {
		return fmt.Errorf("flux watcher: HelmRelease informer: %w", err)
	}
	if _, err := hrInf.AddEventHandler(onEveryChange(func(o interface{}) { w.releaseChanged(ctx, o) })); err != nil {
		return err
	}
	crdInf, err := w.cache.GetInformer(ctx, &apiextensionsv1.CustomResourceDefinition{})
	if err != nil {
		return fmt.Errorf("flux watcher: CRD informer: %w", err)
	}
	if _, err := crdInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { w.crdChanged(o, false) },
		UpdateFunc: func(_, o interface{}) { w.crdChanged(o, false) },
		DeleteFunc: func(o interface{}) { w.crdChanged(o, true) },
	}); err != nil {
		return err
	}
	return runQueue(ctx, "flux watcher", w.cache, w.queue, func() {
		w.synced.Store(true)
		w.log.Info("flux watcher synced", "namespaces", w.opts.Namespaces, "apiVersion", ReleaseGroupVersion(w.apiVersion).String())
	}, func(key watchKey) { w.evaluate(ctx, key, sink) })
}

// releaseChanged queues the release and every release that depends on it.
func (w *Watcher) releaseChanged(ctx context.Context, o interface{}) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	hr, ok := o.(*helmv2.HelmRelease)
	if !ok {
		return
	}
	w.queue.Add(watchKey{nn: types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}})
	var dependents helmv2.HelmReleaseList
	if err := w.cache.List(ctx, &dependents, client.MatchingFields{dependsOnIndex: hr.Namespace + "/" + hr.Name}); err != nil {
		w.log.Debug("listing dependents", "namespace", hr.Namespace, "name", hr.Name, "error", err)
		return
	}
	for i := range dependents.Items {
		d := &dependents.Items[i]
		w.queue.Add(watchKey{nn: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
	}
}

func dependsOnKeys(o client.Object) []string {
	hr, ok := o.(*helmv2.HelmRelease)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(hr.Spec.DependsOn))
	for _, d := range hr.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = hr.Namespace
		}
		keys = append(keys, ns+"/"+d.Name)
	}
	return keys
}

// Remediers are the flux/* remedies (ReconcileRequester) on the watcher's client, so the reconcile requests are
// read and written through the HelmRelease API version the watcher reads.
func (w *Watcher) Remediers() syncmedic.Remediers { return NewReconcileRequester(w.direct).Remediers() }
