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

// TestDuplicateAndReplayedEventsOnlyAskForAnotherEvaluation posts one signed event several times (notification-
// controller retrying, or an attacker replaying a captured request) through the real receiver into a real tracker:
// every copy is accepted, each only re-evaluates the HelmRelease's own state, and the stuck release has exactly one
// incident, announced once.
func TestDuplicateAndReplayedEventsOnlyAskForAnotherEvaluation(t *testing.T) {
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
	r, err := NewReceiver(ReceiverOptions{Token: testToken, Handle: func(ctx context.Context, ev *Event) {
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
	for i := 0; i < 3; i++ {
		req := httptest.NewRequest(http.MethodPost, EventsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(SignatureHeader, sig)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		require.Equal(t, http.StatusAccepted, rec.Code, "copy %d", i+1)
	}
	for i := 0; i < 3; i++ {
		require.Equal(t, "flux/apps/redis", <-evaluated)
	}
	require.Len(t, tracker.Incidents(), 1, "three copies of one event, one incident")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []incident.EventKind{incident.EventOpened}, announced, "announced once")
}
