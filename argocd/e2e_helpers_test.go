package argocd_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// dial returns an argocd.Client through addr (plaintext) with token.
func dial(t *testing.T, addr, token string) *argocd.APIClient {
	t.Setenv("ARGOCD_AUTH_TOKEN", token)
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: addr, PlainText: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seen is one report of findings for a subject, with the time it arrived.
type seen struct {
	at       time.Time
	subject  string
	findings []syncmedic.Finding
}

// recorder is a Sink that keeps every report.
type recorder struct {
	mu      sync.Mutex
	reports []seen
}

func (r *recorder) Observe(_ context.Context, subject string, fs []syncmedic.Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, seen{at: time.Now(), subject: subject, findings: fs})
}

// startWatcher runs a Watcher on c until the test ends.
func startWatcher(t *testing.T, c argocd.Client, th rules.Thresholds) (*argocd.Watcher, *recorder, <-chan error) {
	w, err := argocd.NewWatcher(argocd.WatcherOptions{Client: c, Thresholds: th, Resync: time.Second,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	require.NoError(t, err)
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- w.Run(ctx, rec)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return w, rec, done
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
