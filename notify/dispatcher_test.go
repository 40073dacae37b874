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
	"github.com/syncmedic/syncmedic/incident"
)

// recorder is a destination that fails as scripted, then records what it delivered.
type recorder struct {
	mu        sync.Mutex
	script    []error // returned first, in order; nil entries succeed
	calls     int
	delivered []string
}

func (r *recorder) Notify(_ context.Context, ev incident.Event) (bool, error) {
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

func ev(id string, kind incident.EventKind) incident.Event {
	return incident.Event{Kind: kind, Incident: incident.Incident{ID: id}}
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
	waits := recordWaits(d)
	want := []string{"a:opened", "b:opened", "a:remediating", "a:resolved", "b:resolved"}
	for _, w := range want {
		id, kind, _ := cut(w)
		d.Publish(ev(id, incident.EventKind(kind)))
	}
	run(t, d)
	require.Eventually(t, func() bool { return len(rec.got()) == len(want) }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, want, rec.got())
	got := waits()
	require.Len(t, got, 3)
	require.Equal(t, 300*time.Millisecond, got[1], "the Retry-After replaces the backoff")
	require.Less(t, got[0], got[2], "the backoff grows between retries")
	require.Equal(t, 3.0, count(t, d, "slack", "retried"))
	require.Equal(t, 5.0, count(t, d, "slack", "sent"))
}

func TestDispatcherBackoff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		min, max time.Duration
	}{
		{name: "a short outage is retried after about the minimum backoff", failures: 1, min: time.Second, max: 5 * time.Minute},
		{name: "a long outage grows the wait to the maximum and never gives up", failures: 30, min: time.Second, max: 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := make([]error, tc.failures)
			for i := range script {
				script[i] = errors.New("retry")
			}
			rec := &recorder{script: script}
			d := NewDispatcher(DispatcherOptions{MinBackoff: tc.min, MaxBackoff: tc.max}, Destination{Name: "webhook", Notifier: rec})
			waits := recordWaits(d)
			d.Publish(ev("a", incident.EventOpened))
			run(t, d)
			require.Eventually(t, func() bool { return len(rec.got()) == 1 }, 5*time.Second, time.Millisecond)
			got := waits()
			require.Len(t, got, tc.failures)
			jitter := func(d time.Duration) time.Duration { return d + d/5 }
			require.GreaterOrEqual(t, got[0], tc.min-tc.min/5)
			require.LessOrEqual(t, got[0], jitter(tc.min))
			for _, w := range got {
				require.LessOrEqual(t, w, jitter(tc.max))
			}
			if tc.failures > 10 {
				require.GreaterOrEqual(t, got[len(got)-1], tc.max-tc.max/5, "the wait reached the maximum")
			}
			require.Equal(t, 0.0, count(t, d, "webhook", "failed"))
			require.Equal(t, 1.0, count(t, d, "webhook", "sent"))
		})
	}
}

func TestDispatcherDoesNotRetryARefusal(t *testing.T) {
	rec := &recorder{script: []error{errors.New("channel_not_found")}}
	d := NewDispatcher(DispatcherOptions{MinBackoff: time.Millisecond}, Destination{Name: "slack", Notifier: rec})
	d.Publish(ev("a", incident.EventOpened))
	d.Publish(ev("a", incident.EventResolved))
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
		d.Publish(ev(id, incident.EventOpened))
	}
	require.Equal(t, 1.0, count(t, d, "webhook", "dropped"))
	require.Contains(t, logs.String(), `"msg":"notification queue full: event dropped","notifier":"webhook","incident":"c"`)
	run(t, d)
	require.Eventually(t, func() bool { return len(rec.got()) == 2 }, 5*time.Second, 5*time.Millisecond)
}

func TestADestinationThatIsDownDelaysOnlyItself(t *testing.T) {
	down := NotifierFunc(func(ctx context.Context, _ incident.Event) (bool, error) { return true, errors.New("503") })
	up := &recorder{}
	d := NewDispatcher(DispatcherOptions{MinBackoff: time.Hour}, Destination{Name: "down", Notifier: down},
		Destination{Name: "up", Notifier: up})
	d.Publish(ev("a", incident.EventOpened))
	run(t, d)
	require.Eventually(t, func() bool { return len(up.got()) == 1 }, 5*time.Second, 5*time.Millisecond)
}

// recordWaits makes d record each wait between retries and end it at once.
func recordWaits(d *Dispatcher) func() []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	d.after = func(w time.Duration) <-chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, w)
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), waits...)
	}
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

// refresher counts refreshes and fails as scripted (a fake for this unit test of the dispatcher's loop).
type refresher struct {
	mu     sync.Mutex
	script []error
	n      int
}

func (r *refresher) RefreshInterval() time.Duration { return 5 * time.Millisecond }

func (r *refresher) Refresh(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.script) > 0 {
		err := r.script[0]
		r.script = r.script[1:]
		return err
	}
	return nil
}

func (r *refresher) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func TestDispatcherRefreshesWhatIsStillOpen(t *testing.T) {
	t.Run("a destination's refresher runs on its interval and its failures are counted, not fatal", func(t *testing.T) {
		ref := &refresher{script: []error{errors.New("503")}}
		d := NewDispatcher(DispatcherOptions{}, Durable(Destination{Name: "alertmanager", Notifier: &recorder{}, Refresher: ref}, &memOutbox{}))
		run(t, d)
		require.Eventually(t, func() bool { return count(t, d, "alertmanager", "refreshed") >= 2 }, 5*time.Second, time.Millisecond)
		require.Equal(t, 1.0, count(t, d, "alertmanager", "refresh_failed"))
	})
	t.Run("a refresh that succeeds while a retry waits ends the wait", func(t *testing.T) {
		ref := &refresher{}
		rec := &recorder{script: []error{errors.New("retry")}}
		d := NewDispatcher(DispatcherOptions{MinBackoff: time.Hour}, Destination{Name: "alertmanager", Notifier: rec, Refresher: ref})
		d.Publish(ev("a", incident.EventOpened))
		run(t, d)
		require.Eventually(t, func() bool { return len(rec.got()) == 1 }, 5*time.Second, time.Millisecond)
		require.Positive(t, ref.count())
	})
	t.Run("a refresh does not cut short a wait the destination asked for with Retry-After", func(t *testing.T) {
		ref := &refresher{}
		rec := &recorder{script: []error{&RetryAfterError{After: time.Hour, Err: errors.New("429")}}}
		d := NewDispatcher(DispatcherOptions{}, Destination{Name: "alertmanager", Notifier: rec, Refresher: ref})
		d.Publish(ev("a", incident.EventOpened))
		run(t, d)
		require.Eventually(t, func() bool { return ref.count() >= 3 }, 5*time.Second, time.Millisecond)
		require.Empty(t, rec.got())
	})
}

// inFlight is a destination whose Notify blocks until released or its context ends; it reports how each call ended.
type inFlight struct {
	entered  chan struct{}
	release  chan struct{}
	finished chan error
}

func (f *inFlight) Notify(ctx context.Context, _ incident.Event) (bool, error) {
	f.entered <- struct{}{}
	select {
	case <-f.release:
		f.finished <- nil
		return false, nil
	case <-ctx.Done():
		f.finished <- ctx.Err()
		return true, ctx.Err()
	}
}

// A shutdown does not cut off a notification under way: it gets ShutdownGrace to finish (the destination may have
// acted on it already, and its answer is what records it delivered); past that it is cancelled, so a destination that
// hangs does not hold the shutdown.
func TestAnAttemptUnderWayAtShutdownGetsItsGrace(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  bool
		want    error
		counted string
	}{
		{"an answer within the grace is delivered", true, nil, "sent"},
		{"no answer within the grace is cancelled", false, context.Canceled, "failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &inFlight{entered: make(chan struct{}, 1), release: make(chan struct{}), finished: make(chan error, 1)}
			d := NewDispatcher(DispatcherOptions{ShutdownGrace: 300 * time.Millisecond}, Destination{Name: "slow", Notifier: f})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); d.Run(ctx) }()
			d.Publish(ev("a", incident.EventOpened))
			<-f.entered
			cancel()
			if tt.answer {
				time.Sleep(50 * time.Millisecond) // Run's context has ended: the attempt goes on
				close(f.release)
			}
			require.Equal(t, tt.want, <-f.finished)
			<-done
			require.Equal(t, 1.0, count(t, d, "slow", tt.counted))
		})
	}
}
