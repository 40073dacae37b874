package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
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
	// a nil error (serve logs what runs). It must not block and must not need its peer: an error from start is a
	// configuration error that stops serve with exit code 2, so anything that needs Argo CD or the apiserver to
	// answer goes into parts.Sources (see lateSource), where an outage delays the component and nothing else.
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
	Policy func() *policy.Policy
	// Incidents returns the tracker's incidents, open first (nil before the tracker exists, which is only while
	// components start).
	Incidents func() []incident.Incident
	// Fix plans or applies an incident's remedy on a person's request, as the policy's fixBy allows
	// (remedy.Fixer.Fix); Changes signals the next change of the incidents (Tracker.Changes). Both wait for the tracker.
	Fix     func(ctx context.Context, id string, req remedy.FixRequest) (remedy.FixResult, error)
	Changes func() <-chan struct{}
	MayFix  func(inc incident.Incident, c policy.Caller) (bool, string)
	// OnCall acknowledges incidents and keeps silences (the tracker, once it exists).
	OnCall onCall
}

// serveParts is what a started component contributes.
type serveParts struct {
	// Sources run for the life of serve, feeding the tracker.
	Sources []syncmedic.Source
	// Remediers apply the component's actions; serve calls them only on the leader and only as the policy allows.
	Remediers syncmedic.Remediers
	// Handlers are served on --listen, by path ("/flux/events").
	Handlers map[string]http.Handler
	// Ready, when set, must return nil for /readyz to pass; /readyz names the component and shows the error.
	Ready func() error
	// Close, when set, releases what the Remediers use (a connection), once serve has stopped and the remedies in
	// flight have drained.
	Close func()
}

// contributes reports whether the component runs anything (a component that is not configured contributes nothing
// and is left out of /readyz).
func (p serveParts) contributes() bool {
	return len(p.Sources) > 0 || len(p.Handlers) > 0 || p.Ready != nil
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

// lateSource is a source that can only be built once its peer answers (argocd-server, the apiserver): Run calls
// build with exponential backoff until it succeeds, then runs what it built. Until then Ready names the peer and
// the last error, so /readyz shows why, and nothing else in serve waits for it.
type lateSource[S syncmedic.Source] struct {
	// peer names what build needs, for logs and /readyz ("argocd-server argocd-server.argocd.svc:443").
	peer  string
	build func(ctx context.Context) (S, error)
	// backOff returns the wait between attempts (default newConnectBackOff).
	backOff func() backoff.BackOff
	log     *slog.Logger

	mu       sync.Mutex
	src      S
	built    bool
	attempts int
	err      error
}

// connectInterval and connectMaxInterval bound the wait between attempts to reach a peer: soon enough that a peer
// coming back is noticed within half a minute, slow enough not to hammer one that is down.
const (
	connectInterval    = 500 * time.Millisecond
	connectMaxInterval = 30 * time.Second
)

// newConnectBackOff waits 0.5s, 0.75s, … up to 30s (±50% jitter) between attempts, forever.
func newConnectBackOff() backoff.BackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(connectInterval),
		backoff.WithMaxInterval(connectMaxInterval), backoff.WithMaxElapsedTime(0))
}

var _ syncmedic.Source = (*lateSource[syncmedic.Source])(nil)

// Run builds the source, retrying until ctx ends, then runs it.
func (l *lateSource[S]) Run(ctx context.Context, sink syncmedic.Sink) error {
	newBackOff := l.backOff
	if newBackOff == nil {
		newBackOff = newConnectBackOff
	}
	op := func() (S, error) {
		src, err := l.build(ctx)
		l.mu.Lock()
		l.attempts++
		l.err = err
		if err == nil {
			l.src, l.built = src, true
		}
		l.mu.Unlock()
		return src, err
	}
	notify := func(err error, wait time.Duration) {
		l.log.Warn("cannot reach "+l.peer+" yet; retrying", "error", err, "retryIn", wait.Round(time.Millisecond))
	}
	src, err := backoff.RetryNotifyWithData(op, backoff.WithContext(newBackOff(), ctx), notify)
	if err != nil {
		return nil // ctx ended: the backoff never gives up on its own
	}
	l.log.Info("connected to "+l.peer, "attempts", l.Attempts())
	return src.Run(ctx, sink)
}

// Source returns what build returned, once it succeeded.
func (l *lateSource[S]) Source() (S, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.src, l.built
}

// Attempts counts the calls of build so far.
func (l *lateSource[S]) Attempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts
}

// Ready returns nil once the source is built and ready (by ready, when given), else why not.
func (l *lateSource[S]) Ready(ready func(S) error) error {
	l.mu.Lock()
	src, built, attempts, err := l.src, l.built, l.attempts, l.err
	l.mu.Unlock()
	switch {
	case built && ready != nil:
		return ready(src)
	case built:
		return nil
	case attempts == 0:
		return errors.New("connecting to " + l.peer)
	default:
		return fmt.Errorf("cannot reach %s (%d attempts, retrying): %w", l.peer, attempts, err)
	}
}
