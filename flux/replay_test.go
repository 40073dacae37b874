package flux

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/incident"
)

// TestAReplayedEventIsAcceptedOnceAndRefusedOnceStale posts one signed event several times (notification-
// controller retrying after a lost answer, or an attacker replaying a captured request) through the real receiver
// into a real tracker: every copy inside the replay window is answered 202 but only the first is evaluated, the stuck
// release has exactly one incident, announced once, and the same body replayed after the window is refused 400.
func TestAReplayedEventIsAcceptedOnceAndRefusedOnceStale(t *testing.T) {
	stuck := release("redis", 3, 2, cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Release reconciliation succeeded", time.Hour))
	var mu sync.Mutex
	var announced []incident.EventKind
	tracker, err := incident.NewTracker(context.Background(), incident.TrackerOptions{
		Now: func() time.Time { return now },
		Publisher: incident.PublisherFunc(func(ev incident.Event) {
			mu.Lock()
			defer mu.Unlock()
			announced = append(announced, ev.Kind)
		}),
	})
	require.NoError(t, err)
	evaluated := make(chan string, 8)
	clock := sampleNow()
	r, err := NewReceiver(ReceiverOptions{Token: testToken, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock },
		Handle: func(ctx context.Context, ev *Event) {
			// What serve does: the event names the subject; the state judged is the release's own, never the event's.
			tracker.Observe(ctx, ev.Subject(), EvaluateRelease(ReleaseObservation{Release: stuck}, now, DefaultThresholds()))
			evaluated <- ev.Subject()
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx, nil) }()

	body := sampleEvent(t)
	sig := signed(t, "sha256", body)
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(SignatureHeader, sig)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusAccepted, post().Code, "copy %d", i+1)
	}
	require.Equal(t, "flux/apps/redis", <-evaluated)
	require.Equal(t, 1.0, counterValue(t, r.counter.WithLabelValues(ResultAccepted)))
	require.Equal(t, 2.0, counterValue(t, r.counter.WithLabelValues(ResultDuplicate)))
	require.Len(t, tracker.Incidents(), 1, "three copies of one event, one incident")

	mu.Lock()
	clock = sampleTime.Add(DefaultMaxEventAge + time.Second) // the window has passed: the copy is stale
	mu.Unlock()
	rec := post()
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, "stale event: timestamp 2026-03-10T12:00:00Z is 10m1s old, more than the 10m0s replay window "+
		"(a replayed or long-delayed event; check the clocks of notification-controller's and syncmedic's nodes)\n", rec.Body.String())
	select {
	case s := <-evaluated:
		t.Fatalf("a duplicate or stale copy was evaluated: %s", s)
	case <-time.After(100 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []incident.EventKind{incident.EventOpened}, announced, "announced once")
}

// TestAnEventRefusedForAFullQueueIsNotADuplicate: notification-controller retries a 429, and the retry is queued.
func TestAnEventRefusedForAFullQueueIsNotADuplicate(t *testing.T) {
	r, err := NewReceiver(ReceiverOptions{Token: testToken, QueueSize: 1, Now: sampleNow})
	require.NoError(t, err)
	r.queue <- &Event{}
	body := sampleEvent(t)
	post := func() int {
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header.Set(SignatureHeader, signed(t, "sha256", body))
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusTooManyRequests, post())
	<-r.queue
	require.Equal(t, http.StatusAccepted, post())
	require.Len(t, r.queue, 1, "the retry is queued, not dropped as a copy")
	require.Equal(t, 0.0, counterValue(t, r.counter.WithLabelValues(ResultDuplicate)))
}

func TestReplayWindowForgetsTheOldestDigestsWhenFull(t *testing.T) {
	at := sampleTime
	w := newReplayWindow(time.Minute, 2, func() time.Time { return at })
	admit := func(body string) bool { return w.admit([]byte(body), at, func() bool { return true }) }
	require.False(t, admit("a"))
	require.False(t, admit("b"))
	require.True(t, admit("a"), "a copy of a")
	require.False(t, admit("c"), "c pushes a, the oldest, out")
	require.Len(t, w.seen, 2)
	require.True(t, admit("b"))
	require.True(t, admit("c"))
	require.False(t, admit("a"), "a was forgotten")

	at = at.Add(2 * time.Minute) // every digest expired
	require.False(t, admit("d"))
	require.Len(t, w.seen, 1, "expired digests are dropped")
}
