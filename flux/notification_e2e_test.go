package flux_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/events"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxnc"
)

// signatureLog records the X-Signature header and the response code of every request reaching the receiver.
type signatureLog struct {
	mu    sync.Mutex
	sigs  []string
	codes []int
}

type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *signatureLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(cw, r)
		s.mu.Lock()
		s.sigs = append(s.sigs, r.Header.Get(flux.SignatureHeader))
		s.codes = append(s.codes, cw.code)
		s.mu.Unlock()
	})
}

func (s *signatureLog) sawCode(code int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.codes {
		if c == code {
			return true
		}
	}
	return false
}

func (s *signatureLog) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sigs...)
}

// TestFluxEventsTakeTheProductionPath sends events with Flux's own recorder to the real notification-controller,
// which forwards them through a generic-hmac Provider and an Alert to syncmedic's receiver, where the signature is
// verified and the event handed on for re-evaluation of the HelmRelease.
func TestFluxEventsTakeTheProductionPath(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	token := []byte("e2e-hmac-" + ns)

	hr := createRelease(t, env, ns, "redis")
	watcher, sink := startWatcher(t, env, flux.DefaultThresholds(), ns)
	subject := flux.ReleaseSubject(ns, hr.Name)
	require.Eventually(t, func() bool { return sink.evaluations(subject) > 0 }, 20*time.Second, 20*time.Millisecond)

	got := make(chan *flux.Event, 64)
	r, err := flux.NewReceiver(flux.ReceiverOptions{Token: token, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Handle: func(_ context.Context, ev *flux.Event) {
			watcher.Trigger(ev.Subject()) // what serve wires through its Triggers
			got <- ev
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	sigs := &signatureLog{}
	mux := http.NewServeMux()
	mux.Handle(flux.EventsPath, sigs.wrap(r))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	nc := fluxnc.Start(t, env.Config, env.Kubeconfig)
	fluxnc.ForwardHelmReleaseEvents(t, env.Client, ns, srv.URL+flux.EventsPath, token)
	before := sink.evaluations(subject)

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	recorder, err := events.NewRecorder(mgr, logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nc.EventsURL(), "helm-controller")
	require.NoError(t, err)

	// The Alert reaches notification-controller's cache asynchronously: send distinct events (distinct messages
	// also avoid its duplicate-event rate limit) until one arrives.
	var ev *flux.Event
	attempt := 0
	require.Eventually(t, func() bool {
		attempt++
		recorder.AnnotatedEventf(hr, map[string]string{"revision": "1.0.0"}, corev1.EventTypeWarning, "DependencyNotReady",
			"dependency '%s/postgres' is not ready (attempt %d)", ns, attempt)
		select {
		case ev = <-got:
			return true
		case <-time.After(500 * time.Millisecond):
			return false
		}
	}, 60*time.Second, 10*time.Millisecond, "no event reached the receiver; see the notification-controller log")

	require.Equal(t, subject, ev.Subject())
	require.Equal(t, "DependencyNotReady", ev.Reason)
	require.Equal(t, "error", ev.Severity)
	require.Equal(t, "helm-controller", ev.ReportingController)
	require.True(t, strings.HasPrefix(ev.Message, fmt.Sprintf("dependency '%s/postgres' is not ready", ns)))

	require.Eventually(t, func() bool { return sink.evaluations(subject) > before }, 20*time.Second, 20*time.Millisecond,
		"the accepted event re-evaluates the HelmRelease at once")

	require.NotEmpty(t, sigs.all())
	for _, s := range sigs.all() {
		require.True(t, strings.HasPrefix(s, "sha256="), "notification-controller signs with sha256, got %q", s)
	}

	t.Run("events signed with another token are refused with 401 and never handled", func(t *testing.T) {
		other := env.Namespace(t)
		fluxnc.ForwardHelmReleaseEvents(t, env.Client, other, srv.URL+flux.EventsPath, []byte("not-the-receivers-token"))
		intruder := createRelease(t, env, other, "intruder")
		attempt := 0
		require.Eventually(t, func() bool {
			attempt++
			recorder.AnnotatedEventf(intruder, nil, corev1.EventTypeNormal, "UpgradeSucceeded", "upgrade %d", attempt)
			return sigs.sawCode(http.StatusUnauthorized)
		}, 60*time.Second, 500*time.Millisecond)
		for {
			select {
			case ev := <-got:
				require.NotEqual(t, other, ev.InvolvedObject.Namespace, "an event with a bad signature was handled")
				continue
			default:
			}
			break
		}
	})
}
