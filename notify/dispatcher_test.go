package notify

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

// recorder is a destination that fails as scripted, then records what it delivered.
type recorder struct {
	mu        sync.Mutex
	script    []error // returned first, in order; nil entries succeed
	calls     int
	delivered []string
}

func (r *recorder) Notify(_ context.Context, ev syncmedic.Event) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if len(r.script) > 0 {
		err := r.script[0]
		r.script = r.script[1:]
		if err != nil {
			var ra *RetryAfterError
			return errors.As(err, &ra) || err.Error() == "retry", err
		}
	}
	r.delivered = append(r.delivered, ev.Incident.ID+":"+string(ev.Kind))
	return false, nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.delivered...)
}

func ev(id string, kind syncmedic.EventKind) syncmedic.Event {
	return syncmedic.Event{Kind: kind, Incident: syncmedic.Incident{ID: id}}
}

func run(t *testing.T, d *Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestDispatcherRetriesInOrderAndHonoursRetryAfter(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{script: []error{errors.New("retry"), &RetryAfterError{After: 300 * time.Millisecond, Err: errors.New("429")}, errors.New("retry")}}
	d := NewDispatcher(DispatcherOptions{MinBackoff: time.Millisecond, Registerer: reg}, Destination{Name: "slack", Notifier: rec})
	want := []string{"a:opened", "b:opened", "a:remediating", "a:resolved", "b:resolved"}
	for _, w := range want {
		id, kind, _ := cut(w)
		d.Publish(ev(id, syncmedic.EventKind(kind)))
	}
	start := time.Now()
	run(t, d)
	require.Eventually(t, func() bool { return len(rec.got()) == len(want) }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, want, rec.got())
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Equal(t, 3.0, count(t, d, "slack", "retried"))
	require.Equal(t, 5.0, count(t, d, "slack", "sent"))
}

func TestDispatcherDoesNotRetryARefusal(t *testing.T) {
	rec := &recorder{script: []error{errors.New("channel_not_found")}}
	d := NewDispatcher(DispatcherOptions{MinBackoff: time.Millisecond}, Destination{Name: "slack", Notifier: rec})
	d.Publish(ev("a", syncmedic.EventOpened))
	d.Publish(ev("a", syncmedic.EventResolved))
	run(t, d)
	require.Eventually(t, func() bool { return len(rec.got()) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"a:resolved"}, rec.got())
	require.Equal(t, 1.0, count(t, d, "slack", "failed"))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, 2, rec.calls)
}

func TestDispatcherCountsAndLogsWhatDoesNotFit(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{}
	d := NewDispatcher(DispatcherOptions{QueueSize: 2, Log: slog.New(slog.NewJSONHandler(&logs, nil))},
		Destination{Name: "webhook", Notifier: rec})
	for _, id := range []string{"a", "b", "c"} {
		d.Publish(ev(id, syncmedic.EventOpened))
	}
	require.Equal(t, 1.0, count(t, d, "webhook", "dropped"))
	require.Contains(t, logs.String(), `"msg":"notification queue full: event dropped","notifier":"webhook","incident":"c"`)
	run(t, d)
	require.Eventually(t, func() bool { return len(rec.got()) == 2 }, 5*time.Second, 5*time.Millisecond)
}

func TestADestinationThatIsDownDelaysOnlyItself(t *testing.T) {
	down := NotifierFunc(func(ctx context.Context, _ syncmedic.Event) (bool, error) { return true, errors.New("503") })
	up := &recorder{}
	d := NewDispatcher(DispatcherOptions{MinBackoff: time.Hour}, Destination{Name: "down", Notifier: down},
		Destination{Name: "up", Notifier: up})
	d.Publish(ev("a", syncmedic.EventOpened))
	run(t, d)
	require.Eventually(t, func() bool { return len(up.got()) == 1 }, 5*time.Second, 5*time.Millisecond)
}

func count(t *testing.T, d *Dispatcher, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, d.sent.WithLabelValues(labels...).Write(&m))
	return m.GetCounter().GetValue()
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
