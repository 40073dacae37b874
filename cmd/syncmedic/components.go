package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/snapshot"
)

// serveComponent is one part of `syncmedic serve` (Argo CD, Flux, the cluster checks). Each lives in its own file
// (serve_argocd.go, serve_flux.go, …) and registers itself with registerServeComponent from an init function, so
// serve.go wires them without knowing them.
type serveComponent struct {
	// name is used in logs and errors ("argocd", "flux", "kube").
	name string
	// flags adds the component's flags to serve's flag set. The values are read in start.
	flags func(fs *pflag.FlagSet)
	// start builds the component once flags are parsed. A component that is not configured returns zero parts and
	// a nil error (serve logs what runs). It must not block: long-running work goes into parts.Sources.
	start func(ctx context.Context, d serveDeps) (serveParts, error)
}

// serveDeps is what serve hands every component.
type serveDeps struct {
	Log *slog.Logger
	// Kube is the cluster's REST config; nil when serve runs without a cluster (receiver only).
	Kube *rest.Config
	// Metrics is where components register their collectors (names start with syncmedic_).
	Metrics prometheus.Registerer
	// Thresholds are the age thresholds from flags, overridden per rule by the policy.
	Thresholds snapshot.Thresholds
	// Trigger asks for an immediate re-evaluation of a subject (an accepted Flux event, say); components that own
	// the subject register a handler for their prefix with Triggers.Handle.
	Triggers *triggers
	// Policy returns the remediation policy in force (nil in tests that build deps by hand).
	Policy func() *syncmedic.Policy
	// Incidents returns the tracker's incidents, open first (nil before the tracker exists, which is only while
	// components start).
	Incidents func() []syncmedic.Incident
}

// serveParts is what a started component contributes.
type serveParts struct {
	// Sources run for the life of serve, feeding the tracker.
	Sources []syncmedic.Source
	// Remediers apply the component's actions; serve calls them only on the leader and only as the policy allows.
	Remediers syncmedic.Remediers
	// Handlers are served on --listen, by path ("/flux/events").
	Handlers map[string]http.Handler
	// Ready, when set, must return nil for /readyz to pass.
	Ready func() error
}

var serveComponents []serveComponent

func registerServeComponent(c serveComponent) { serveComponents = append(serveComponents, c) }

// triggers routes "re-evaluate this subject now" requests to the component that owns the subject's prefix
// ("flux/", "argocd/", "kube/").
type triggers struct {
	handlers map[string]func(subject string)
}

// Handle registers fn for subjects starting with prefix.
func (t *triggers) Handle(prefix string, fn func(subject string)) {
	if t.handlers == nil {
		t.handlers = map[string]func(string){}
	}
	t.handlers[prefix] = fn
}

// Fire calls the handler owning subject, if any, and reports whether one did.
func (t *triggers) Fire(subject string) bool {
	for p, fn := range t.handlers {
		if len(subject) >= len(p) && subject[:len(p)] == p {
			fn(subject)
			return true
		}
	}
	return false
}

// delegator is a Remedier that serves an action only for some objects and hands the others to another component's
// Remedier for the same action (kube's Workflow remedier hands Workflows an Argo CD app owns to Argo CD's
// PatchResource).
type delegator interface {
	syncmedic.Remedier
	DelegateTo(syncmedic.Remedier)
}

// mergeRemedier combines two components' Remediers for one action: the one that delegates keeps the other as its
// delegate. Two that both insist on the action are a wiring error, never a silent override.
func mergeRemedier(have, add syncmedic.Remedier) (syncmedic.Remedier, error) {
	if have == nil {
		return add, nil
	}
	if d, ok := have.(delegator); ok {
		d.DelegateTo(add)
		return d, nil
	}
	if d, ok := add.(delegator); ok {
		d.DelegateTo(have)
		return d, nil
	}
	return nil, errors.New("two components apply it and neither delegates to the other")
}
