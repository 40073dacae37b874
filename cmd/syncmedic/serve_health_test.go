package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/syncmedic/syncmedic"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func TestHealthzFailsOnlyWhileTheTrackerIsWedged(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	h := newHeartbeat(clock.Now)
	h.every = time.Millisecond
	var beats atomic.Int64
	wedged, blocked := make(chan struct{}), make(chan struct{}, 1)
	var wedge atomic.Bool
	probe := func() {
		if wedge.Load() {
			select {
			case blocked <- struct{}{}:
			default:
			}
			<-wedged
		}
		beats.Add(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.run(ctx, probe) }()
	defer func() { cancel(); <-done }()
	healthz := func() (int, string) {
		rec := httptest.NewRecorder()
		h.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}

	t.Run("a process whose tracker answers is healthy", func(t *testing.T) {
		require.Eventually(t, func() bool { return beats.Load() > 0 }, 10*time.Second, time.Millisecond)
		code, body := healthz()
		require.Equal(t, http.StatusOK, code, body)
	})
	t.Run("a tracker that stops answering fails /healthz once the limit passes, saying for how long", func(t *testing.T) {
		wedge.Store(true)
		select {
		case <-blocked:
		case <-time.After(10 * time.Second):
			t.Fatal("the heartbeat never probed the tracker again")
		}
		clock.Add(heartbeatStale / 2)
		code, _ := healthz()
		require.Equal(t, http.StatusOK, code, "within the limit")
		clock.Add(heartbeatStale)
		code, body := healthz()
		require.Equal(t, http.StatusInternalServerError, code)
		require.Contains(t, body, "wedged: the tracker has not answered for 1m30s (the limit is 1m0s)")
	})
	t.Run("a tracker that answers again makes the process healthy again", func(t *testing.T) {
		wedge.Store(false)
		close(wedged)
		require.Eventually(t, func() bool { code, _ := healthz(); return code == http.StatusOK }, 10*time.Second, time.Millisecond)
	})
}

func TestReadyzNamesEachComponent(t *testing.T) {
	down := errors.New("cannot reach argocd-server argocd-server.argocd.svc:443 (3 attempts, retrying): connection refused")
	refused := syncmedic.Permanent(errors.New("argocd watch: not authenticated: the token is missing, expired or revoked"))
	tests := []struct {
		name     string
		ready    map[string]error
		waited   bool
		wantCode int
		wantBody string
	}{
		{name: "every component ready answers 200 listing each", ready: map[string]error{"argocd": nil, "flux": nil},
			wantCode: http.StatusOK, wantBody: "argocd: ok\nflux: ok\n"},
		{name: "a starting pod with a component down answers 503 naming it and why, and the others ok",
			ready:    map[string]error{"argocd": down, "flux": nil},
			wantCode: http.StatusServiceUnavailable, wantBody: "argocd: " + down.Error() + "\nflux: ok\n"},
		{name: "once the wait has passed a component down still shows in the body but the pod is ready",
			ready: map[string]error{"argocd": down, "flux": nil}, waited: true,
			wantCode: http.StatusOK, wantBody: "argocd: " + down.Error() + "\nflux: ok\n"},
		{name: "a configuration error keeps a pod that was never ready unready after the wait",
			ready: map[string]error{"argocd": refused, "flux": nil}, waited: true,
			wantCode: http.StatusServiceUnavailable, wantBody: "argocd: " + refused.Error() + "\nflux: ok\n"},
		{name: "no component at all is ready", ready: map[string]error{}, wantCode: http.StatusOK, wantBody: "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
			r := &readiness{wait: 30 * time.Second, start: clock.Now(), now: clock.Now}
			for _, name := range []string{"argocd", "flux"} {
				if err, ok := tt.ready[name]; ok {
					r.add(name, func() error { return err })
				}
			}
			if tt.waited {
				clock.Add(30 * time.Second)
			}
			code, body := probeReadyz(r, "/readyz")
			require.Equal(t, tt.wantCode, code)
			require.Equal(t, tt.wantBody, body)
		})
	}
}

func TestReadyzOnceReadyStaysReadyThroughOutagesAndRevokedTokens(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	r := &readiness{wait: time.Hour, start: clock.Now(), now: clock.Now}
	var argoErr atomic.Value
	argoErr.Store(errBox{})
	r.add("argocd", func() error { return argoErr.Load().(errBox).err })
	r.add("flux", func() error { return nil })
	code, body := probeReadyz(r, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	for _, err := range []error{
		errors.New("cannot reach argocd-server argocd-server.argocd.svc:443 (3 attempts, retrying): connection refused"),
		syncmedic.Permanent(errors.New("argocd watch: not authenticated: the token is missing, expired or revoked")),
	} {
		argoErr.Store(errBox{err})
		code, body := probeReadyz(r, "/readyz?verbose")
		require.Equal(t, http.StatusOK, code, "a pod that served keeps serving its receiver and API")
		require.Equal(t, "argocd: "+err.Error()+"\nflux: ok\n", body)
	}
}

func TestIsConfigError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "refused connection", err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused")},
		{name: "gRPC Unavailable", err: status.Error(codes.Unavailable, "argocd-server: not connected yet")},
		{name: "gRPC Unauthenticated, wrapped", err: fmt.Errorf("stopped: %w", status.Error(codes.Unauthenticated, "invalid session")), want: true},
		{name: "gRPC PermissionDenied", err: status.Error(codes.PermissionDenied, "permission denied"), want: true},
		{name: "permanent", err: fmt.Errorf("cannot reach x: %w", syncmedic.Permanent(errors.New("untrusted certificate"))), want: true},
		{name: "Kubernetes 403", err: apierrors.NewForbidden(schema.GroupResource{Resource: "helmreleases"}, "", errors.New("no")), want: true},
		{name: "Kubernetes 401", err: apierrors.NewUnauthorized("token expired"), want: true},
		{name: "Kubernetes 503", err: apierrors.NewServiceUnavailable("apiserver restarting")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, isConfigError(tt.err))
		})
	}
}

// errBox lets atomic.Value hold a nil error.
type errBox struct{ err error }

// probeReadyz asks r for path and returns the status and body.
func probeReadyz(r *readiness, path string) (int, string) {
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// countingSource counts its runs and stops when told.
type countingSource struct{ runs atomic.Int64 }

func (s *countingSource) Run(ctx context.Context, _ syncmedic.Sink) error {
	s.runs.Add(1)
	<-ctx.Done()
	return nil
}

func TestLateSourceRetriesUntilItsPeerAnswers(t *testing.T) {
	refused := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	var failures atomic.Int64
	failures.Store(3)
	src := &countingSource{}
	late := &lateSource[*countingSource]{peer: "argocd-server 10.0.0.1:443", log: slog.New(slog.DiscardHandler),
		backOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
		build: func(context.Context) (*countingSource, error) {
			if failures.Add(-1) >= 0 {
				return nil, refused
			}
			return src, nil
		}}
	ready := func(s *countingSource) error { return nil }

	t.Run("before the first attempt it is not ready and says it is connecting", func(t *testing.T) {
		require.EqualError(t, late.Ready(ready), "connecting to argocd-server 10.0.0.1:443")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- late.Run(ctx, nil) }()
	t.Run("after the peer answers it runs what it built, once", func(t *testing.T) {
		require.Eventually(t, func() bool { return src.runs.Load() == 1 }, 10*time.Second, time.Millisecond)
		require.Equal(t, 4, late.Attempts(), "three refusals and a success")
		require.NoError(t, late.Ready(ready))
		built, ok := late.Source()
		require.True(t, ok)
		require.Same(t, src, built)
	})
	t.Run("it stops when its context ends", func(t *testing.T) {
		cancel()
		require.NoError(t, <-done)
	})
	t.Run("while the peer refuses, Ready names it, the attempts and the last error", func(t *testing.T) {
		never := &lateSource[*countingSource]{peer: "the apiserver", log: slog.New(slog.DiscardHandler),
			backOff: func() backoff.BackOff { return &backoff.ZeroBackOff{} },
			build:   func(context.Context) (*countingSource, error) { return nil, refused }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- never.Run(ctx, nil) }()
		require.Eventually(t, func() bool { return never.Attempts() >= 2 }, 10*time.Second, time.Millisecond)
		err := never.Ready(ready)
		require.ErrorIs(t, err, refused)
		require.Contains(t, err.Error(), "cannot reach the apiserver (")
		cancel()
		require.NoError(t, <-done, "an outage is not an error of serve")
		_, ok := never.Source()
		require.False(t, ok)
	})
}

// failingOnce stops with err on its first run and runs until its context ends after that.
type failingOnce struct {
	err  error
	runs atomic.Int64
}

func (s *failingOnce) Run(ctx context.Context, _ syncmedic.Sink) error {
	if s.runs.Add(1) == 1 {
		return s.err
	}
	<-ctx.Done()
	return nil
}

func TestASourceThatStopsIsShownOnReadyzAndRestarted(t *testing.T) {
	refused := errors.New("argocd watch (all applications): not authenticated")
	tests := []struct {
		name string
		// wait is the backoff before the restart.
		wait      time.Duration
		wantRuns  int64
		wantReady string
	}{
		{name: "while it waits to restart, /readyz shows why it stopped", wait: time.Hour, wantRuns: 1,
			wantReady: "argocd: stopped, restarting in 1h0m0s: argocd watch (all applications): not authenticated\n"},
		{name: "once restarted it runs again and the error is cleared", wait: 0, wantRuns: 2, wantReady: "argocd: ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &failingOnce{err: refused}
			d := &daemon{log: slog.New(slog.DiscardHandler), names: []string{"argocd"}, failed: []*sourceState{{}},
				restartBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(tt.wait) }}
			d.ready.add("argocd", d.failed[0].get)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.runSource(ctx, 0, src) }()
			defer func() { cancel(); <-done }()
			var body string
			require.Eventually(t, func() bool {
				body, _ = d.ready.report()
				return src.runs.Load() == tt.wantRuns && body == tt.wantReady
			}, 10*time.Second, time.Millisecond, "runs %d, /readyz %q", src.runs.Load(), body)
		})
	}
}
