package incident

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func seqs(evs []Event) []int {
	var out []int
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

func TestOutbox(t *testing.T) {
	ctx := context.Background()
	t.Run("without durable delivery events are not numbered and nothing is kept", func(t *testing.T) {
		pub := &events{}
		tr := newTestTracker(t, TrackerOptions{Publisher: pub})
		tr.Observe(ctx, "argocd/shop", []syncmedic.Finding{hookFinding("shop", "migrate")})
		require.Equal(t, []int{0}, seqs(pub.evs))
		require.Empty(t, tr.Incidents()[0].Outbox)
	})

	t.Run("transitions are numbered, kept until every notifier delivered them, then dropped", func(t *testing.T) {
		pub, store := &events{}, &MemoryStore{}
		tr := newTestTracker(t, TrackerOptions{Publisher: pub, Store: store})
		tr.ResumeDelivery(ctx, "slack", "webhook")
		tr.Observe(ctx, "argocd/shop", []syncmedic.Finding{hookFinding("shop", "migrate")})
		for range 3 {
			tr.Observe(ctx, "argocd/shop", nil)
		}
		require.Equal(t, []EventKind{EventOpened, EventResolved}, pub.kinds())
		require.Equal(t, []int{1, 2}, seqs(pub.evs))
		require.Empty(t, pub.evs[0].Incident.Outbox, "notifiers do not see the bookkeeping")
		id := pub.evs[0].Incident.ID

		stored, err := store.Load(ctx)
		require.NoError(t, err)
		require.Len(t, stored[0].Outbox, 2, "saved with the incident before it was published")

		tr.MarkDelivered(ctx, id, "slack", 2)
		require.Equal(t, 2, tr.LastDelivered(id, "slack"))
		require.Len(t, tr.Incidents()[0].Outbox, 2, "the webhook has delivered nothing yet")
		tr.MarkDelivered(ctx, id, "webhook", 1)
		require.Len(t, tr.Incidents()[0].Outbox, 1)
		tr.MarkDelivered(ctx, id, "webhook", 2)
		tr.MarkDelivered(ctx, id, "webhook", 1) // late and out of order: ignored
		require.Empty(t, tr.Incidents()[0].Outbox)
		require.Equal(t, 2, tr.LastDelivered(id, "webhook"))

		stored, err = store.Load(ctx)
		require.NoError(t, err)
		require.Empty(t, stored[0].Outbox, "deliveries are persisted")
	})

	t.Run("a restart re-publishes what is undelivered, in order, and only that", func(t *testing.T) {
		store := &MemoryStore{}
		first := newTestTracker(t, TrackerOptions{Publisher: &events{}, Store: store})
		first.ResumeDelivery(ctx, "slack")
		first.Observe(ctx, "argocd/a", []syncmedic.Finding{hookFinding("a", "migrate")})
		first.Observe(ctx, "argocd/b", []syncmedic.Finding{hookFinding("b", "migrate")})
		first.Observe(ctx, "argocd/a", nil)
		first.Observe(ctx, "argocd/a", nil)
		first.Observe(ctx, "argocd/a", nil)
		a := first.Incidents()[1] // resolved, listed after the open one
		require.Equal(t, StateResolved, a.State)
		first.MarkDelivered(ctx, a.ID, "slack", 1)

		pub := &events{}
		second := newTestTracker(t, TrackerOptions{Publisher: pub, Store: store})
		require.Empty(t, pub.evs, "nothing is published before the notifiers are attached")
		second.ResumeDelivery(ctx, "slack")
		require.Equal(t, []EventKind{EventResolved, EventOpened}, pub.kinds())
		require.Equal(t, a.ID, pub.evs[0].Incident.ID)
		require.Equal(t, []int{2, 1}, seqs(pub.evs))
		require.Equal(t, StateResolved, pub.evs[0].Incident.State)
	})

	t.Run("a follower keeps no outbox; on becoming leader it re-publishes the store's", func(t *testing.T) {
		store := &MemoryStore{}
		leader := newTestTracker(t, TrackerOptions{Publisher: &events{}, Store: store})
		leader.ResumeDelivery(ctx, "slack")
		leader.Observe(ctx, "argocd/a", []syncmedic.Finding{hookFinding("a", "migrate")})

		var leading atomic.Bool
		pub := &events{}
		follower := newTestTracker(t, TrackerOptions{Publisher: pub, Store: store, Leader: leading.Load})
		follower.ResumeDelivery(ctx, "slack")
		follower.Observe(ctx, "argocd/a", []syncmedic.Finding{hookFinding("a", "migrate")})
		require.Empty(t, pub.evs)
		require.Empty(t, follower.Incidents()[0].Outbox)

		leading.Store(true)
		follower.Observe(ctx, "argocd/a", []syncmedic.Finding{hookFinding("a", "migrate")})
		require.Equal(t, []EventKind{EventOpened}, pub.kinds(), "the opening the old leader never delivered")
		require.Equal(t, 1, pub.evs[0].Seq)
	})
}
