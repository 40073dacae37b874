package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/kube"
)

// fixRemediers builds the remediers `fix` can use with the live sources given: Argo CD's (through the Argo CD API)
// with --argocd-server; Flux's reconcile requests and the Workflow remedy (through the Kubernetes API) with
// the cluster (--kubeconfig, --context, or the kubeconfig's defaults) — the same ones, merged the same way, as `serve` uses.
func fixRemediers(o *liveOptions, log *slog.Logger) (syncmedic.Remediers, func(), error) {
	rems := syncmedic.Remediers{}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	add := func(more syncmedic.Remediers) error {
		for a, r := range more {
			merged, err := mergeRemedier(rems[a], r)
			if err != nil {
				return fmt.Errorf("action %s: %w", a, err)
			}
			rems[a] = merged
		}
		return nil
	}
	if o.argocd.enabled() {
		c, err := argocd.Dial(o.argocd.clientOptions())
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, func() { _ = c.Close() })
		rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, Log: log})
		if err != nil {
			return nil, closeAll, err
		}
		if err := add(rem.Remediers()); err != nil {
			return nil, closeAll, err
		}
	}
	if o.kubeEnabled() {
		cfg, err := o.restConfig()
		if err != nil {
			return nil, closeAll, err
		}
		fluxRems, err := fluxRemediers(cfg)
		if err != nil {
			return nil, closeAll, fmt.Errorf("%s: %w", o.kubeSource(), err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, closeAll, fmt.Errorf("%s: %w", o.kubeSource(), err)
		}
		wf := kube.NewWorkflowRemedier(dyn)
		if err := add(fluxRems); err != nil {
			return nil, closeAll, err
		}
		if err := add(syncmedic.Remediers{syncmedic.ActionForceFinalizerRemoval: wf}); err != nil {
			return nil, closeAll, err
		}
	}
	return rems, closeAll, nil
}

// fluxRemediers are the flux/* remedies (reconcile requests) on a client that reads and patches HelmReleases through
// the newest API version the cluster serves (v2, or v2beta2 on Flux 2.2, or v2beta1), the version serve's watcher
// writes through. A cluster that serves no HelmRelease API has none: no scan of it can have found a Flux finding.
func fluxRemediers(cfg *rest.Config) (syncmedic.Remediers, error) {
	version, err := flux.ServedAPIVersion(cfg)
	if errors.Is(err, flux.ErrNoHelmReleaseAPI) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := flux.AddReleaseTypes(scheme, version); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return flux.NewReconcileRequester(c).Remediers(), nil
}

// neededSource says which flag a missing action needs.
func neededSource(a syncmedic.ActionID) string {
	if strings.HasPrefix(string(a), "argocd/") {
		return "--argocd-server: it goes through the Argo CD API"
	}
	return "--kubeconfig or --context: it goes through the Kubernetes API"
}
