package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Liveness: a heartbeat goroutine takes the tracker's lock every heartbeatInterval; /healthz fails once no beat came
// for heartbeatStale, which only a wedged process (a deadlock on the lock every evaluation, notification and remedy
// goes through) lets happen. An unreachable Argo CD or apiserver never fails /healthz: it fails /readyz.
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

// readiness is /readyz: one line per running component, "name: ok" or "name: why not"; 200 when every line is ok,
// else 503.
type readiness struct {
	names []string
	ready []func() error
}

// add registers a component; ready returns nil when it is ready.
func (r *readiness) add(name string, ready func() error) {
	r.names, r.ready = append(r.names, name), append(r.ready, ready)
}

// report returns the body and whether every component is ready.
func (r *readiness) report() (string, bool) {
	if len(r.names) == 0 {
		return "ok\n", true
	}
	var b strings.Builder
	ok := true
	for i, name := range r.names {
		if err := r.ready[i](); err != nil {
			ok = false
			fmt.Fprintf(&b, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintf(&b, "%s: ok\n", name)
	}
	return b.String(), ok
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
