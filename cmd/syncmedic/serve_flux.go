package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/secretfile"
)

// fluxOptions are the Flux component's flags.
type fluxOptions struct {
	enabled    bool
	tokenFile  string
	unsigned   bool
	maxAge     time.Duration
	bodyLimit  string
	queueSize  int
	namespaces []string
	watch      bool
	controller string
	storage    bool
}

func init() {
	o := &fluxOptions{}
	registerServeComponent(serveComponent{
		name: "flux",
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&o.enabled, "flux", true, "run the Flux part: the event receiver ("+flux.EventsPath+"), the HelmRelease and Kustomization watch and "+
				"their remedies; --flux=false for an install without Flux (Argo CD only), which then needs no --flux-hmac-token-file")
			fs.StringVar(&o.tokenFile, "flux-hmac-token-file", "", "file holding the generic-hmac Provider's token (required): "+flux.EventsPath+" accepts only events whose X-Signature matches")
			fs.BoolVar(&o.unsigned, "flux-receiver-insecure-no-signature", false, "for tests only: run the Flux receiver without --flux-hmac-token-file, accepting unsigned events from anyone who can reach it")
			fs.DurationVar(&o.maxAge, "flux-event-max-age", flux.DefaultMaxEventAge, "how far a signed Flux event's timestamp may be from now (older or later: 400); within it a replayed body is accepted once")
			fs.StringVar(&o.bodyLimit, "flux-body-limit", "1Mi", "largest Flux event body accepted (a Kubernetes quantity); larger bodies get 413")
			fs.IntVar(&o.queueSize, "flux-queue-size", flux.DefaultQueueSize, "accepted Flux events waiting to be processed before the receiver answers 429")
			fs.StringSliceVar(&o.namespaces, "flux-namespaces", nil, "namespaces whose HelmReleases and Kustomizations are watched (default: all)")
			fs.StringVar(&o.controller, "flux-controller-deployment", flux.DefaultControllerDeployment.String(), "helm-controller's Deployment (namespace/name); its image tag adds version advisories to findings (best effort)")
			fs.BoolVar(&o.storage, "flux-read-helm-storage", false, "read Helm's release Secrets (owner=helm) of a HelmRelease in progress past its timeout, as evidence of flux/helmrelease-ready-unknown; needs get and list on Secrets, which the shipped role does not grant")
			fs.BoolVar(&o.watch, "flux-watch", true, "watch HelmReleases, the HelmRelease CRD and Kustomizations when a cluster is configured")
		},
		start: func(ctx context.Context, d serveDeps) (serveParts, error) { return startFlux(ctx, d, o) },
	})
}

// errNoFluxToken is startFlux's error without --flux-hmac-token-file: serve does not start a receiver anyone could
// post to.
var errNoFluxToken = errors.New("--flux-hmac-token-file is required: the Flux receiver (POST " + flux.EventsPath + ") accepts only events " +
	"signed by a generic-hmac Provider. Put a random token in syncmedic's Secret (key flux-hmac-token) and the same one in the Secret " +
	"syncmedic-flux-hmac (key token) in flux-system, apply manifests/flux (a generic-hmac Provider with secretRef syncmedic-flux-hmac; " +
	"docs/install-kustomize.md, \"Sending Flux events to syncmedic\") and pass the token's file; without Flux, pass --flux=false; --flux-receiver-insecure-no-signature runs without it, for tests only")

func startFlux(_ context.Context, d serveDeps, o *fluxOptions) (serveParts, error) {
	log := d.Log.With("component", "flux")
	if !o.enabled {
		log.Info("flux: off (--flux=false): no event receiver, no HelmRelease or Kustomization watch")
		return serveParts{}, nil
	}
	limit, err := resource.ParseQuantity(o.bodyLimit)
	if err != nil || limit.Value() <= 0 {
		return serveParts{}, fmt.Errorf("--flux-body-limit %q: want a positive quantity such as 1Mi or 65536", o.bodyLimit)
	}
	var token []byte
	var tokenSource func() string
	if o.tokenFile != "" {
		// Read again when the file changes: a rotated Secret signs the next event with the new token.
		f, err := secretfile.Open("--flux-hmac-token-file", o.tokenFile)
		if err != nil {
			return serveParts{}, err
		}
		token, tokenSource = []byte(f.Value()), f.Value
	} else {
		if !o.unsigned {
			return serveParts{}, errNoFluxToken
		}
		log.Warn("--flux-receiver-insecure-no-signature: Flux events are accepted without a signature from anyone who can reach " + flux.EventsPath + " (for tests only)")
	}
	if o.maxAge <= 0 {
		return serveParts{}, fmt.Errorf("--flux-event-max-age %s: want a positive duration such as 10m", o.maxAge)
	}
	receiver, err := flux.NewReceiver(flux.ReceiverOptions{
		Token: token, TokenSource: tokenSource, AllowUnsigned: o.unsigned, MaxEventAge: o.maxAge,
		MaxBodyBytes: limit.Value(), QueueSize: o.queueSize, Log: log, Metrics: d.Metrics,
		Handle: func(_ context.Context, ev *flux.Event) {
			if s := ev.Subject(); s != "" {
				d.Triggers.Fire(s)
			}
		},
	})
	if err != nil {
		return serveParts{}, err
	}
	parts := serveParts{Handlers: map[string]http.Handler{flux.EventsPath: receiver}}
	parts.Sources = append(parts.Sources, receiver)
	if d.Kube == nil || !o.watch {
		log.Info("flux: only the event receiver runs (no HelmRelease watch, no reconcile remedies)", "path", flux.EventsPath)
		return parts, nil
	}
	ns, name, ok := strings.Cut(o.controller, "/")
	if !ok || ns == "" || name == "" {
		return serveParts{}, fmt.Errorf("--flux-controller-deployment %q: want namespace/name", o.controller)
	}
	// Which HelmRelease API the cluster serves (v2, or v2beta2 on Flux 2.2, or v2beta1) is asked in the background,
	// so an unreachable apiserver delays the watch and not the receiver.
	watch := &lateSource[syncmedic.Source]{peer: "the apiserver", log: log, build: func(context.Context) (syncmedic.Source, error) {
		version, err := flux.ServedAPIVersion(d.Kube)
		if errors.Is(err, flux.ErrNoHelmReleaseAPI) {
			log.Info(err.Error() + ": the HelmRelease watch is off")
			return idleSource{}, nil
		}
		if err != nil {
			return nil, err
		}
		w, err := flux.NewWatcher(flux.WatcherOptions{Config: d.Kube, Namespaces: o.namespaces, Thresholds: d.Thresholds.Flux, Log: log,
			ControllerDeployment: types.NamespacedName{Namespace: ns, Name: name}, APIVersion: version, ReadHelmStorage: o.storage})
		if err != nil {
			return nil, err
		}
		log.Info("flux: watching HelmReleases and receiving events", "apiVersion", flux.ReleaseGroupVersion(version).String(), "path", flux.EventsPath, "namespaces", o.namespaces, "signed", len(token) > 0)
		return w, nil
	}}
	parts.Sources = append(parts.Sources, watch)
	// Remedies go through the watcher's client, so they write through the API version it reads (v2beta2 on Flux
	// 2.2); until the watcher runs they wait (a transient error, retried like any other).
	parts.Remediers = syncmedic.Remediers{}
	for action := range flux.NewReconcileRequester(nil).Remediers() {
		parts.Remediers[action] = syncmedic.RemedierFunc(func(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
			if s, ok := watch.Source(); ok {
				if w, ok := s.(*flux.Watcher); ok {
					return w.Remediers()[action].Remediate(ctx, f, dryRun)
				}
				return syncmedic.Outcome{}, syncmedic.Permanent(errors.New("flux: this cluster serves no HelmRelease API, so there is nothing to reconcile through"))
			}
			return syncmedic.Outcome{}, errors.New("flux: the HelmRelease watch has not started yet (the apiserver is not answering): the remedy is retried once it runs")
		})
	}
	parts.Ready = func() error {
		return watch.Ready(func(s syncmedic.Source) error {
			if w, ok := s.(*flux.Watcher); ok {
				return w.Ready()
			}
			return nil
		})
	}
	d.Triggers.Handle("flux/", func(subject string) {
		if s, ok := watch.Source(); ok {
			if w, ok := s.(*flux.Watcher); ok {
				w.Trigger(subject)
			}
		}
	})
	addKustomizationWatch(d, o, log, &parts)
	return parts, nil
}

// addKustomizationWatch adds the Kustomization watcher (started in the background like the HelmRelease one, idle
// when the cluster serves no Kustomization API), its flux/reconcile-kustomization remedy and its triggers (the
// receiver's Kustomization events) to parts.
func addKustomizationWatch(d serveDeps, o *fluxOptions, log *slog.Logger, parts *serveParts) {
	watch := &lateSource[syncmedic.Source]{peer: "the apiserver", log: log, build: func(context.Context) (syncmedic.Source, error) {
		version, err := flux.ServedKustomizationAPIVersion(d.Kube)
		if errors.Is(err, flux.ErrNoKustomizationAPI) {
			log.Info(err.Error() + ": the Kustomization watch is off")
			return idleSource{}, nil
		}
		if err != nil {
			return nil, err
		}
		w, err := flux.NewKustomizationWatcher(flux.KustomizationWatcherOptions{Config: d.Kube, Namespaces: o.namespaces,
			Thresholds: d.Thresholds.Flux, Log: log, APIVersion: version})
		if err != nil {
			return nil, err
		}
		log.Info("flux: watching Kustomizations", "apiVersion", flux.KustomizationGroup+"/"+version, "namespaces", o.namespaces)
		return w, nil
	}}
	parts.Sources = append(parts.Sources, watch)
	parts.Remediers[syncmedic.ActionFluxReconcileKustomization] = syncmedic.RemedierFunc(func(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
		if s, ok := watch.Source(); ok {
			if w, ok := s.(*flux.KustomizationWatcher); ok {
				return w.Remediers()[syncmedic.ActionFluxReconcileKustomization].Remediate(ctx, f, dryRun)
			}
			return syncmedic.Outcome{}, syncmedic.Permanent(errors.New("flux: this cluster serves no Kustomization API, so there is nothing to reconcile through"))
		}
		return syncmedic.Outcome{}, errors.New("flux: the Kustomization watch has not started yet (the apiserver is not answering): the remedy is retried once it runs")
	})
	helmReady := parts.Ready
	parts.Ready = func() error {
		if err := helmReady(); err != nil {
			return err
		}
		return watch.Ready(func(s syncmedic.Source) error {
			if w, ok := s.(*flux.KustomizationWatcher); ok {
				return w.Ready()
			}
			return nil
		})
	}
	d.Triggers.Handle("flux-kustomization/", func(subject string) {
		if s, ok := watch.Source(); ok {
			if w, ok := s.(*flux.KustomizationWatcher); ok {
				w.Trigger(subject)
			}
		}
	})
}

// idleSource runs until ctx ends and reports nothing: what a component has to watch when the cluster does not
// serve its kind.
type idleSource struct{}

func (idleSource) Run(ctx context.Context, _ syncmedic.Sink) error { <-ctx.Done(); return nil }
