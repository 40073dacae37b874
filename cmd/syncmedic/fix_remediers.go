package main

import (
	"fmt"
	"log/slog"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/kube"
)

// fixRemediers builds the remediers `fix` can use with the live sources given: Argo CD's (through the Argo CD API)
// with --argocd-server; Flux's reconcile requests and the Workflow remedy (through the Kubernetes API) with
// --kubeconfig — the same ones, merged the same way, as `serve` uses.
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
		rem, err := argocd.NewRemedies(argocd.RemedierOptions{Client: c, Log: log})
		if err != nil {
			return nil, closeAll, err
		}
		if err := add(rem.Remediers()); err != nil {
			return nil, closeAll, err
		}
	}
	if o.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, closeAll, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		scheme := runtime.NewScheme()
		if err := helmv2.AddToScheme(scheme); err != nil {
			return nil, closeAll, err
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, closeAll, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, closeAll, fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
		}
		wf := kube.NewWorkflowRemedier(dyn)
		if err := add(flux.NewReconcileRequester(c).Remediers()); err != nil {
			return nil, closeAll, err
		}
		if err := add(syncmedic.Remediers{syncmedic.ActionForceFinalizerRemoval: wf}); err != nil {
			return nil, closeAll, err
		}
	}
	return rems, closeAll, nil
}

// neededSource says which flag a missing action needs.
func neededSource(a syncmedic.ActionID) string {
	if strings.HasPrefix(string(a), "argocd/") {
		return "--argocd-server: it goes through the Argo CD API"
	}
	return "--kubeconfig: it goes through the Kubernetes API"
}
