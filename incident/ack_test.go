package incident

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestAcknowledge(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	evs := &events{}
	store := &MemoryStore{}
	tr := newTestTracker(t, TrackerOptions{Now: c.Now, Publisher: evs, Store: store})
	tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	id := tr.Incidents()[0].ID

	t.Run("the first acknowledgement is recorded, persisted and announced", func(t *testing.T) {
		require.NoError(t, tr.Acknowledge(ctx, id, "alice"))
		inc, _ := tr.Get(id)
		require.Equal(t, &Ack{By: "alice", At: c.Now()}, inc.Ack)
		require.Equal(t, []EventKind{EventOpened, EventAcknowledged}, evs.kinds())
		require.Equal(t, "alice", evs.last().Incident.Ack.By)
		stored, err := store.Load(ctx)
		require.NoError(t, err)
		require.Equal(t, "alice", stored[0].Ack.By)
	})
	t.Run("the same person again changes nothing", func(t *testing.T) {
		c.Advance(60e9)
		require.NoError(t, tr.Acknowledge(ctx, id, "alice"))
		inc, _ := tr.Get(id)
		require.Equal(t, c.Now().Add(-60e9), inc.Ack.At)
		require.Len(t, evs.kinds(), 2)
	})
	t.Run("someone else takes it over", func(t *testing.T) {
		require.NoError(t, tr.Acknowledge(ctx, id, "bob"))
		inc, _ := tr.Get(id)
		require.Equal(t, &Ack{By: "bob", At: c.Now(), TakenOverFrom: "alice"}, inc.Ack)
		require.Equal(t, []EventKind{EventOpened, EventAcknowledged, EventAcknowledged}, evs.kinds())
	})
	t.Run("errors", func(t *testing.T) {
		require.ErrorIs(t, tr.Acknowledge(ctx, "nope", "bob"), ErrNotFound)
		require.ErrorIs(t, tr.Acknowledge(ctx, id, " "), ErrInvalid)
		for range 3 {
			tr.Observe(ctx, "s", nil)
		}
		require.ErrorIs(t, tr.Acknowledge(ctx, id, "carol"), ErrResolved)
	})
}
