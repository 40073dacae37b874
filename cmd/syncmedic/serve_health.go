package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/syncmedic/syncmedic"
)

// Liveness: a heartbeat goroutine takes the tracker's lock every heartbeatInterval; /healthz fails once no beat came
// for heartbeatStale, which only a wedged process (a deadlock on the lock every evaluation, notification and remedy
// goes through) lets happen. An unreachable Argo CD or apiserver never fails /healthz: it shows on /readyz.
const (
	heartbeatInterval = 5 * time.Second
	heartbeatStale    = time.Minute
)

// heartbeat records when probe last returned.
type heartbeat struct {
	every, stale time.Duration
	now          func() time.Time
	last         atomic.Int64 // UnixNano of the last beat
}

func newHeartbeat(now func() time.Time) *heartbeat {
	h := &heartbeat{every: heartbeatInterval, stale: heartbeatStale, now: now}
	h.last.Store(now().UnixNano())
	return h
}

// run calls probe every h.every until ctx ends, recording a beat each time it returns.
func (h *heartbeat) run(ctx context.Context, probe func()) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		probe()
		h.last.Store(h.now().UnixNano())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check returns nil while the last beat is recent, else how long ago it was.
func (h *heartbeat) check() error {
	if age := h.now().Sub(time.Unix(0, h.last.Load())); age > h.stale {
		return fmt.Errorf("wedged: the tracker has not answered for %s (the limit is %s)", age.Round(time.Second), h.stale)
	}
	return nil
}

// healthz answers 200 "ok" while the heartbeat beats, else 500 with the reason.
func (h *heartbeat) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := h.check(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// sourceState is the last failure of a component's sources (nil while they run), shown on /readyz.
type sourceState struct {
	mu  sync.Mutex
	err error
}

func (s *sourceState) set(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }

func (s *sourceState) get() error { s.mu.Lock(); defer s.mu.Unlock(); return s.err }

// readiness is /readyz. Its status says whether this pod can serve its endpoints (the Flux receiver, the incident
// API, the Argo CD extension), so that a source outage never takes the pod out of its Service; its body has one line
// per running component, "name: ok" or "name: why not", so an outage still shows there (and in the metrics).
//
// A starting pod is unready until every component is ready or wait has passed since start, whichever comes first;
// from then on it is ready for good. A configuration error (a refused token, a missing permission, a certificate
// this pod does not trust: see isConfigError) keeps a pod that was never ready unready however long it waits, so a
// rollout with a bad Secret or RBAC stops at its first new pod while the old pods keep serving.
type readiness struct {
	names []string
	ready []func() error
	// wait is how long a starting pod waits for its components (serve's --readiness-wait); start and now time it.
	wait  time.Duration
	start time.Time
	now   func() time.Time
	// served latches once /readyz has answered 200.
	served atomic.Bool
}

// add registers a component; ready returns nil when it is ready.
func (r *readiness) add(name string, ready func() error) {
	r.names, r.ready = append(r.names, name), append(r.ready, ready)
}

// report returns the body and whether the pod is ready.
func (r *readiness) report() (string, bool) {
	if len(r.names) == 0 {
		r.served.Store(true)
		return "ok\n", true
	}
	var b strings.Builder
	allOK, config := true, false
	for i, name := range r.names {
		err := r.ready[i]()
		if err == nil {
			fmt.Fprintf(&b, "%s: ok\n", name)
			continue
		}
		allOK = false
		config = config || isConfigError(err)
		fmt.Fprintf(&b, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	switch {
	case r.served.Load():
	case config:
		return b.String(), false
	case allOK || r.waited():
		r.served.Store(true)
	default:
		return b.String(), false
	}
	return b.String(), true
}

// waited reports whether wait has passed since start.
func (r *readiness) waited() bool {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	return now().Sub(r.start) >= r.wait
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, ok := r.report()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(body))
}

// isConfigError reports whether err is one that waiting does not cure: an error marked permanent (Argo CD's
// "not authenticated" and "permission denied", an account missing a permission, a certificate this pod does not
// trust), a gRPC Unauthenticated or PermissionDenied, or a Kubernetes 401 or 403.
func isConfigError(err error) bool {
	if syncmedic.IsPermanent(err) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if st, ok := status.FromError(e); ok && (st.Code() == codes.Unauthenticated || st.Code() == codes.PermissionDenied) {
			return true
		}
	}
	return false
}
