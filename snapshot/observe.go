package snapshot

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/kube"
)

// Observations are what the rules read, built from one snapshot.
type Observations struct {
	Apps []rules.AppObservation
	// AppSets are the ApplicationSets with the Applications of their namespaces (argocd/rollingsync-stalled).
	AppSets   []rules.AppSetObservation
	Inventory kube.Inventory
	Releases  []flux.ReleaseObservation
	CRDs      []flux.CRDObservation
	// Kustomizations are the Flux Kustomizations, with their dependencies, sources and Events from the dump.
	Kustomizations []flux.KustomizationObservation
	// Problems are objects that could not be turned into observations (in addition to the snapshot's own).
	Problems []Problem
}

var (
	gkApplication   = schema.GroupKind{Group: "argoproj.io", Kind: "Application"}
	gkAppSet        = schema.GroupKind{Group: "argoproj.io", Kind: "ApplicationSet"}
	gkWorkflow      = schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}
	gkHelmRelease   = schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}
	gkCRD           = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	gkService       = schema.GroupKind{Kind: "Service"}
	gkEndpoints     = schema.GroupKind{Kind: "Endpoints"}
	gkEndpointSlice = schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}
	gkValidating    = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}
	gkMutating      = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}
	gkDeployment    = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	gkStatefulSet   = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	gkDaemonSet     = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	gkJob           = schema.GroupKind{Group: "batch", Kind: "Job"}
	gkPod           = schema.GroupKind{Kind: "Pod"}
	gkSecret        = schema.GroupKind{Kind: "Secret"}
	gkKustomization = schema.GroupKind{Group: flux.KustomizationGroup, Kind: flux.KustomizationKind}
	gkGitRepository = schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "GitRepository"}
	gkOCIRepository = schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "OCIRepository"}
	gkBucket        = schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "Bucket"}
	gkEvent         = schema.GroupKind{Kind: "Event"}
	gkNamespace     = schema.GroupKind{Kind: "Namespace"}
)

// Observe builds the rules' observations from the snapshot.
func (s *Snapshot) Observe() Observations {
	var o Observations
	var apps []*v1alpha1.Application
	var appSets []*v1alpha1.ApplicationSet
	var releases []*helmv2.HelmRelease
	readyExprs := map[*helmv2.HelmRelease]map[types.NamespacedName]string{}
	var storage []flux.HelmStorage
	argocdVersion, helmControllerVersion := "", ""
	var ks kustomizationParts
	for _, u := range s.Objects {
		gk := u.GroupVersionKind().GroupKind()
		if ks.add(gk, u, &o) {
			continue
		}
		if workloadKinds[gk] {
			ks.addWorkload(gk, u)
		}
		switch gk {
		case gkApplication:
			app := &v1alpha1.Application{}
			if err := convert(u, app); err != nil {
				o.Problems = append(o.Problems, Problem{File: "Application " + nsName(u), Err: err.Error()})
				continue
			}
			apps = append(apps, app)
		case gkAppSet:
			as := &v1alpha1.ApplicationSet{}
			if err := convert(u, as); err != nil {
				o.Problems = append(o.Problems, Problem{File: "ApplicationSet " + nsName(u), Err: err.Error()})
				continue
			}
			appSets = append(appSets, as)
		case gkHelmRelease:
			// v2beta1, v2beta2 and v2 share the JSON names of every field the rules read, so each version decodes into v2.
			hr := &helmv2.HelmRelease{}
			if err := convert(u, hr); err != nil {
				o.Problems = append(o.Problems, Problem{File: "HelmRelease " + nsName(u), Err: err.Error()})
				continue
			}
			releases = append(releases, hr)
			if exprs := flux.ReadyExprsOf(u); exprs != nil {
				readyExprs[hr] = exprs
			}
		case gkSecret:
			if !isHelmStorage(u) {
				continue
			}
			st, err := flux.HelmStorageOf(u)
			if err != nil {
				o.Problems = append(o.Problems, Problem{File: "Secret " + nsName(u), Err: err.Error()})
			}
			storage = append(storage, st)
		case gkCRD:
			if u.GetName() == flux.CRDName {
				o.CRDs = append(o.CRDs, crdObservation(u))
			}
		case gkWorkflow:
			o.Inventory.Workflows = append(o.Inventory.Workflows, u)
		case gkValidating, gkMutating:
			o.Inventory.WebhookConfigurations = append(o.Inventory.WebhookConfigurations, u)
		case gkService:
			o.Inventory.Services = append(o.Inventory.Services, u)
		case gkEndpoints:
			o.Inventory.Endpoints = append(o.Inventory.Endpoints, u)
		case gkEndpointSlice:
			o.Inventory.EndpointSlices = append(o.Inventory.EndpointSlices, u)
		case gkNamespace:
			o.Inventory.Namespaces = append(o.Inventory.Namespaces, u)
		case gkPod:
			o.Inventory.Pods = append(o.Inventory.Pods, u)
		case gkDeployment:
			if v := imageTag(u, "argocd-server", "argocd"); v != "" {
				argocdVersion = v
			}
			if v := imageTag(u, "helm-controller", "helm-controller"); v != "" {
				helmControllerVersion = v
			}
		}
		if u.GetDeletionTimestamp() != nil && gk != gkWorkflow && gk != gkValidating && gk != gkMutating {
			o.Inventory.Objects = append(o.Inventory.Objects, u)
		}
	}
	o.Inventory.ServicesKnown = s.HasKind(gkService)
	o.Inventory.EndpointsKnown = s.HasKind(gkEndpointSlice) || s.HasKind(gkEndpoints)
	o.Inventory.NamespacesKnown = s.HasKind(gkNamespace)

	hooks := indexHooks(s.Objects)
	for _, app := range apps {
		o.Apps = append(o.Apps, s.appObservation(app, argocdVersion, hooks))
		o.Inventory.WebhookCallFailures = append(o.Inventory.WebhookCallFailures, webhookFailures(app)...)
	}
	o.AppSets = appSetObservations(appSets, apps)
	byName := map[types.NamespacedName]*helmv2.HelmRelease{}
	for _, hr := range releases {
		byName[types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}] = hr
	}
	for _, hr := range releases {
		o.Releases = append(o.Releases, flux.ReleaseObservation{Release: hr, Dependencies: byName, DependenciesKnown: true,
			ReadyExprs: readyExprs[hr], ControllerVersion: helmControllerVersion,
			Storage: flux.LatestStorage(hr, storage), StorageKnown: s.HasKind(gkSecret)})
	}
	o.Kustomizations = ks.observations(s.HasKind(gkEvent), s.HasKind)
	return o
}

// appSetObservations pairs each ApplicationSet with the Applications of its namespace, by name (the controller names
// the Application of each status entry by its name alone).
func appSetObservations(sets []*v1alpha1.ApplicationSet, apps []*v1alpha1.Application) []rules.AppSetObservation {
	if len(sets) == 0 {
		return nil
	}
	byNS := map[string]map[string]*v1alpha1.Application{}
	for _, a := range apps {
		if byNS[a.Namespace] == nil {
			byNS[a.Namespace] = map[string]*v1alpha1.Application{}
		}
		byNS[a.Namespace][a.Name] = a
	}
	out := make([]rules.AppSetObservation, 0, len(sets))
	for _, as := range sets {
		out = append(out, rules.AppSetObservation{AppSet: as, Apps: byNS[as.Namespace]})
	}
	return out
}

// kustomizationParts gathers what the Kustomization rules read from a dump: the Kustomizations, the artifacts of
// the Flux sources and the Events about Kustomizations.
type kustomizationParts struct {
	items     []*flux.Kustomization
	sources   map[string]flux.SourceArtifact // "Kind/namespace/name"
	events    map[types.NamespacedName][]flux.KubeEvent
	workloads map[string]*unstructured.Unstructured // "Kind/namespace/name": the workloads kustomize-controller applied
}

// addWorkload keeps a workload kustomize-controller applied (keep drops the others), for the health evidence.
func (p *kustomizationParts) addWorkload(gk schema.GroupKind, u *unstructured.Unstructured) {
	if !isKustomizationApplied(u) {
		return
	}
	if p.workloads == nil {
		p.workloads = map[string]*unstructured.Unstructured{}
	}
	p.workloads[gk.Kind+"/"+u.GetNamespace()+"/"+u.GetName()] = u
}

// add takes u when it is one of those kinds, and reports whether it did.
func (p *kustomizationParts) add(gk schema.GroupKind, u *unstructured.Unstructured, o *Observations) bool {
	switch gk {
	case gkKustomization:
		k, err := flux.KustomizationFromUnstructured(u)
		if err != nil {
			o.Problems = append(o.Problems, Problem{File: "Kustomization " + nsName(u), Err: err.Error()})
			return true
		}
		p.items = append(p.items, k)
	case gkGitRepository, gkOCIRepository, gkBucket:
		if p.sources == nil {
			p.sources = map[string]flux.SourceArtifact{}
		}
		p.sources[gk.Kind+"/"+nsName(u)] = flux.SourceArtifactOf(u)
	case gkEvent:
		ev := &corev1.Event{}
		if err := convert(u, ev); err != nil || ev.InvolvedObject.Kind != flux.KustomizationKind {
			return true
		}
		if p.events == nil {
			p.events = map[types.NamespacedName][]flux.KubeEvent{}
		}
		nn := types.NamespacedName{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name}
		p.events[nn] = append(p.events[nn], flux.KubeEventsOf([]corev1.Event{*ev})...)
	default:
		return false
	}
	return true
}

// observations pairs every Kustomization with its dependencies, source and Events (eventsKnown: the dump has
// Events), and one whose health check is in progress with its health-checked workloads (health).
func (p *kustomizationParts) observations(eventsKnown bool, hasKind func(schema.GroupKind) bool) []flux.KustomizationObservation {
	byName := map[types.NamespacedName]*flux.Kustomization{}
	for _, k := range p.items {
		byName[types.NamespacedName{Namespace: k.Namespace, Name: k.Name}] = k
	}
	var out []flux.KustomizationObservation
	for _, k := range p.items {
		obs := flux.KustomizationObservation{Kustomization: k, Dependencies: byName, DependenciesKnown: true}
		src := k.SourceKey()
		obs.Source, obs.SourceKnown = p.sources[k.Spec.SourceRef.Kind+"/"+src.Namespace+"/"+src.Name]
		obs.Events, obs.EventsKnown = p.events[types.NamespacedName{Namespace: k.Namespace, Name: k.Name}], eventsKnown
		if c := k.Condition(meta.ReadyCondition); c != nil && c.Status == metav1.ConditionUnknown {
			obs.NotReady, obs.HealthKnown = p.health(k, hasKind)
		}
		out = append(out, obs)
	}
	return out
}

// health judges k's health-checked workloads from the dump. A workload of the inventory that the dump lacks, though
// it has that kind, is not found: kustomize-controller labels what it applies, so keep would have kept it. One only
// named in spec.healthChecks (perhaps not labelled, so dropped), or of a kind the dump lacks, is unknown, and then
// ok is false: the evidence says the objects were not read.
func (p *kustomizationParts) health(k *flux.Kustomization, hasKind func(schema.GroupKind) bool) (held []flux.HeldBy, ok bool) {
	ok = true
	for _, h := range flux.HealthRefs(k) {
		u, found := p.workloads[h.Ref()]
		switch {
		case found:
			if why := flux.WorkloadNotReady(u); why != "" {
				held = append(held, flux.HeldBy{Ref: h.Ref(), Status: why})
			}
		case h.FromInventory && hasKind(schema.FromAPIVersionAndKind(h.APIVersion, h.Kind).GroupKind()):
			held = append(held, flux.HeldBy{Ref: h.Ref(), Status: "not found"})
		default:
			ok = false
		}
	}
	return held, ok
}

// hookIndex finds the hook objects of an application without scanning the whole dump for each app.
type hookIndex struct {
	byApp map[string][]*unstructured.Unstructured
	byKey map[string]*unstructured.Unstructured
}

func hookKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func indexHooks(objs []*unstructured.Unstructured) hookIndex {
	idx := hookIndex{byApp: map[string][]*unstructured.Unstructured{}, byKey: map[string]*unstructured.Unstructured{}}
	for _, u := range objs {
		if !rules.IsHook(u) {
			continue
		}
		if app := kube.ArgoCDApp(u); app != "" {
			idx.byApp[app] = append(idx.byApp[app], u)
		}
		idx.byKey[hookKey(u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())] = u
	}
	return idx
}

// hooksOf returns the hooks managed by app: its tracking annotation or instance label names the app, or the app's
// last sync result lists it.
func (idx hookIndex) hooksOf(app *v1alpha1.Application) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured(nil), idx.byApp[app.Name]...)
	seen := map[*unstructured.Unstructured]bool{}
	for _, u := range out {
		seen[u] = true
	}
	if op := app.Status.OperationState; op != nil && op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			ns := r.Namespace
			if ns == "" {
				ns = app.Spec.Destination.Namespace
			}
			if u, ok := idx.byKey[hookKey(r.Group, r.Kind, ns, r.Name)]; ok && !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

func (s *Snapshot) appObservation(app *v1alpha1.Application, version string, hooks hookIndex) rules.AppObservation {
	obs := rules.AppObservation{App: app, ServerVersion: version}
	referenced := map[schema.GroupKind]bool{}
	if op := app.Status.OperationState; op != nil && op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			if r.HookType != "" {
				referenced[schema.GroupKind{Group: r.Group, Kind: r.Kind}] = true
			}
		}
	}
	obs.HooksKnown = true
	for gk := range referenced {
		if !s.HasKind(gk) {
			obs.HooksKnown = false
		}
	}
	if len(referenced) == 0 {
		obs.HooksKnown = s.HasKind(gkJob) || s.HasKind(gkPod)
	}
	obs.Hooks = hooks.hooksOf(app)
	return obs
}

func webhookFailures(app *v1alpha1.Application) []kube.WebhookCallFailure {
	op := app.Status.OperationState
	if op == nil {
		return nil
	}
	src := "Application " + app.Namespace + "/" + app.Name
	var at time.Time
	if op.FinishedAt != nil {
		at = op.FinishedAt.Time
	} else {
		at = op.StartedAt.Time
	}
	var out []kube.WebhookCallFailure
	msgs := []string{op.Message}
	if op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			msgs = append(msgs, r.Message)
		}
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		if strings.Contains(m, "failed calling webhook") && !seen[m] {
			seen[m] = true
			out = append(out, kube.WebhookCallFailure{Source: src, Message: m, At: at})
		}
	}
	return out
}

func crdObservation(u *unstructured.Unstructured) flux.CRDObservation {
	obs := flux.CRDObservation{Name: u.GetName()}
	obs.StoredVersions, _, _ = unstructured.NestedStringSlice(u.Object, "status", "storedVersions")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]interface{})
		name, _ := m["name"].(string)
		if served, _ := m["served"].(bool); served {
			obs.Served = append(obs.Served, name)
		}
		if storage, _ := m["storage"].(bool); storage {
			obs.Storage = name
		}
	}
	return obs
}

// imageTag returns the image tag of a Deployment called deployment: of its container named container,
// deployment or "manager" (Flux's name), else of its only container; "" when there is none.
func imageTag(u *unstructured.Unstructured, deployment, container string) string {
	if u.GetName() != deployment {
		return ""
	}
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	image := ""
	for _, c := range cs {
		m, _ := c.(map[string]interface{})
		img, _ := m["image"].(string)
		if n, _ := m["name"].(string); n == container || n == deployment || n == "manager" || len(cs) == 1 {
			image = img
			break
		}
	}
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > 0 && !strings.Contains(image[i:], "/") {
		return image[i+1:]
	}
	return ""
}

func convert(u *unstructured.Unstructured, into interface{}) error {
	b, err := appendJSON(nil, u.Object)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("cannot decode %s: %w", u.GetKind(), err)
	}
	return nil
}

func nsName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// Thresholds gathers every package's thresholds.
type Thresholds struct {
	ArgoCD rules.Thresholds
	Kube   kube.Thresholds
	Flux   flux.Thresholds
}

// DefaultThresholds are the catalog's defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{ArgoCD: rules.DefaultThresholds(), Kube: kube.DefaultThresholds(), Flux: flux.DefaultThresholds()}
}

// Scan runs every rule over the observations and returns the findings, the specific ones taking precedence over
// kube/stuck-terminating, sorted by severity (most urgent first), rule, then object.
func Scan(o Observations, now time.Time, th Thresholds) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, a := range o.Apps {
		out = append(out, rules.Evaluate(a, now, th.ArgoCD)...)
	}
	for _, a := range o.AppSets {
		out = append(out, rules.RollingSyncStalled(a, now, th.ArgoCD)...)
	}
	inv := o.Inventory
	// The argocd rules above judge the hooks and Applications of the dump; a live scan says so itself when its Argo CD
	// part reads them through the API instead.
	inv.ArgoCDRulesRun = inv.ArgoCDRulesRun || len(o.Apps) > 0
	out = append(out, kube.Evaluate(inv, now, th.Kube)...)
	for _, r := range o.Releases {
		out = append(out, flux.EvaluateRelease(r, now, th.Flux)...)
	}
	for _, c := range o.CRDs {
		out = append(out, flux.EvaluateCRD(c, now)...)
	}
	for _, k := range o.Kustomizations {
		out = append(out, flux.EvaluateKustomization(k, now, th.Flux)...)
	}
	out = syncmedic.DropShadowed(out)
	syncmedic.SortFindings(out)
	return out
}
