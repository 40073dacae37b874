package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/snapshot"
)

func init() { liveSourceBuilders = append(liveSourceBuilders, kubeLiveSources) }

// liveList is one list a live cluster scan makes: what the kube and Flux rules read, as a dump would hold it.
type liveList struct {
	gvr schema.GroupVersionResource
	gk  schema.GroupKind
	// name, when set, lists only the object(s) of that name (a field selector), in every namespace.
	name string
	// servedVersion, when set, chooses gvr's version when the scan runs: HelmReleases are listed through the newest
	// API version the cluster serves (flux.ServedAPIVersion: v2, or v2beta2 on Flux 2.2, or v2beta1), and skipped
	// like an unserved kind when it serves none (flux.ErrNoHelmReleaseAPI).
	servedVersion func(*rest.Config) (string, error)
	// labels, when set, lists only the objects it selects; forbiddenOK makes a refused list a problem named in the
	// report rather than a failed scan (Secrets: the account may not read them; Namespaces, the Kustomization kinds, Events:
	// credentials made for an older syncmedic do not grant them, and the rules of the other kinds still run).
	labels      string
	forbiddenOK bool
	// fields, when set, is the list's field selector (Events about Kustomizations only).
	fields string
}

// liveLists are the kinds `scan --kubeconfig` reads. Pods are left out on purpose (a cluster has too many, and the
// Argo CD part reads hook Pods through the Argo CD API); the two Deployments give the version advisories.
var liveLists = []liveList{
	{gvr: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, gk: schema.GroupKind{Group: "batch", Kind: "Job"}},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, gk: schema.GroupKind{Kind: "PersistentVolumeClaim"}},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, gk: schema.GroupKind{Kind: "Service"}},
	// Namespaces (few): the webhook rules say whether a backend's or owner's Namespace is gone or Terminating.
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, gk: schema.GroupKind{Kind: "Namespace"}, forbiddenOK: true},
	{gvr: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, gk: schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}},
	{gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, gk: schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}},
	{gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}, gk: schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}},
	{gvr: schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}, gk: schema.GroupKind{Group: "argoproj.io", Kind: "Workflow"}},
	{gvr: schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Resource: "helmreleases"}, gk: schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}, servedVersion: flux.ServedAPIVersion},
	{gvr: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, gk: schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, name: "helmreleases.helm.toolkit.fluxcd.io"},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}, name: "argocd-server"},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, gk: schema.GroupKind{Group: "apps", Kind: "Deployment"}, name: "helm-controller"},
	// Flux Kustomizations (through the newest version served), their sources' artifacts, and the Events about them
	// (flux/kustomization-deletion-stuck's evidence: a failed prune is recorded only as an Event).
	{gvr: schema.GroupVersionResource{Group: flux.KustomizationGroup, Resource: "kustomizations"}, gk: schema.GroupKind{Group: flux.KustomizationGroup, Kind: flux.KustomizationKind}, servedVersion: flux.ServedKustomizationAPIVersion, forbiddenOK: true},
	{gvr: schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}, gk: schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "GitRepository"}, forbiddenOK: true},
	{gvr: schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}, gk: schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "OCIRepository"}, forbiddenOK: true},
	{gvr: schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "buckets"}, gk: schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "Bucket"}, forbiddenOK: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "events"}, gk: schema.GroupKind{Kind: "Event"}, fields: "involvedObject.kind=Kustomization", forbiddenOK: true},
	// Helm's release records (flux/helmrelease-ready-unknown's evidence): only Secrets labelled owner=helm.
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, gk: schema.GroupKind{Kind: "Secret"}, labels: "owner=helm", forbiddenOK: true},
}

// kubeLiveSources is the live cluster part of `scan` and `fix`: when it is on (liveOptions.kubeEnabled) it lists the
// kinds above and runs the same rules as a snapshot scan over them (one code path for dumps and live clusters).
func kubeLiveSources(o *liveOptions, th snapshot.Thresholds) ([]findingSource, error) {
	if !o.kubeEnabled() {
		return nil, nil
	}
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.kubeSource(), err)
	}
	read := new(string)
	return []findingSource{{name: "cluster " + cfg.Host, read: read, scan: func(ctx context.Context, now time.Time) ([]syncmedic.Finding, []string, error) {
		s, problems, err := listLive(ctx, cfg, dyn)
		if err != nil {
			return nil, nil, err
		}
		*read = s.Summary()
		obs := s.Observe()
		obs.Inventory.ArgoCDRulesRun = o.argocd.judgesAllHooks()
		for _, p := range obs.Problems {
			problems = append(problems, p.String())
		}
		n, err := readKustomizationHealth(ctx, cfg, obs.Kustomizations, now, th)
		if err != nil {
			problems = append(problems, err.Error())
		}
		if n > 0 {
			*read += fmt.Sprintf("; and the health-checked workloads of %d Kustomization(s) in progress past their timeout", n)
		}
		return snapshot.Scan(obs, now, th), problems, nil
	}}}, nil
}

// listLive reads liveLists into a Snapshot. A kind the cluster does not serve (no Argo Workflows, no Flux) is
// skipped and named in the problems, so no rule claims its objects are missing and no all-clear hides that they
// were not read; any other error fails the scan.
func listLive(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface) (*snapshot.Snapshot, []string, error) {
	s := &snapshot.Snapshot{}
	var problems []string
	for _, l := range liveLists {
		gvr := l.gvr
		if l.servedVersion != nil {
			v, err := l.servedVersion(cfg)
			switch {
			case errors.Is(err, flux.ErrNoHelmReleaseAPI), errors.Is(err, flux.ErrNoKustomizationAPI):
				problems = append(problems, fmt.Sprintf("%s: not served by this cluster, skipped: %v", gvr.GroupResource(), err))
				continue
			case err != nil:
				return nil, nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
			}
			gvr.Version = v
		}
		opts := metav1.ListOptions{}
		if l.name != "" {
			opts.FieldSelector = "metadata.name=" + l.name
		}
		if l.fields != "" {
			opts.FieldSelector = l.fields
		}
		opts.LabelSelector = l.labels
		list, err := dyn.Resource(gvr).List(ctx, opts)
		switch {
		case l.forbiddenOK && apierrors.IsForbidden(err):
			what := gvr.GroupResource().String()
			if sel := strings.Trim(l.labels+","+l.fields, ","); sel != "" {
				what += " (" + sel + ")"
			}
			problems = append(problems, fmt.Sprintf("%s: not readable with these credentials, skipped: %v", what, err))
			continue
		case apierrors.IsNotFound(err):
			problems = append(problems, fmt.Sprintf("%s: not served by this cluster, skipped", gvr.GroupResource()))
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err)
		}
		s.AddLive(l.gk, list.Items)
	}
	return s, problems, nil
}

// readKustomizationHealth reads, as serve does, the health-checked workloads (Deployments, StatefulSets, DaemonSets,
// Jobs) of each Kustomization whose health check looks stuck, so flux/kustomization-health-check-stuck names the one
// that holds it; only those few objects are fetched. What Observe judged from the lists replaces nothing: they hold
// no workload but the two named Deployments, so it is dropped first. A workload the credentials may not read leaves
// the evidence saying "not read". It returns how many Kustomizations' workloads it read (the report says so); the
// error says when no client could be made (the findings then say not read too).
func readKustomizationHealth(ctx context.Context, cfg *rest.Config, ks []flux.KustomizationObservation, now time.Time, th snapshot.Thresholds) (int, error) {
	var c client.Client
	n := 0
	for i := range ks {
		ks[i].NotReady, ks[i].HealthKnown = nil, false
		if !flux.HealthCheckDue(ks[i].Kustomization, now, th.Flux) {
			continue
		}
		if c == nil {
			var err error
			if c, err = client.New(cfg, client.Options{}); err != nil {
				return n, fmt.Errorf("reading the workloads Kustomizations health-check: %w", err)
			}
		}
		ks[i].NotReady, ks[i].HealthKnown = flux.ReadHealth(ctx, c, ks[i].Kustomization)
		n++
	}
	return n, nil
}
