package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// After a restart, a notification that was still queued (Slack was down) arrives exactly once, in the incident's
// one thread, and a later restart repeats nothing that was delivered.
func TestNotificationQueuedAtShutdownArrivesExactlyOnceAfterRestart(t *testing.T) {
	ctx := context.Background()
	env := testenv.Kube(t)
	store := &incident.ConfigMapStore{Client: env.Clientset, Namespace: env.Namespace(t), Name: "syncmedic-state"}
	srv := newFakeSlack(t)
	srv.fail(status(503))
	shop := hookFinding("shop", "migrate")

	first := startReplica(t, store, srv, nil, "")
	first.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{shop})
	require.Eventually(t, func() bool { return srv.refusedCalls() >= 2 }, 10*time.Second, 10*time.Millisecond,
		"the dispatcher keeps retrying while Slack is down")
	first.stop()

	stored, err := store.Load(ctx)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Len(t, stored[0].Outbox, 2, "the opening and the dry-run record are persisted as undelivered")
	require.Empty(t, srv.received())

	srv.ok()
	second := startReplica(t, store, srv, nil, "")
	require.Eventually(t, func() bool {
		roots := srv.roots("migrate")
		return len(roots) == 1 && len(srv.replies(roots[0].TS)) == 1
	}, 10*time.Second, 10*time.Millisecond, "the queued notifications arrive once Slack is back")
	second.tracker.Observe(ctx, "argocd/shop", []syncmedic.Finding{shop})
	for range 3 {
		second.tracker.Observe(ctx, "argocd/shop", nil)
	}
	root := srv.roots("migrate")[0]
	require.Eventually(t, func() bool { return len(srv.replies(root.TS)) == 2 }, 10*time.Second, 10*time.Millisecond,
		"the resolution is posted in the same thread")
	second.stop()

	third := startReplica(t, store, srv, nil, "")
	third.tracker.Observe(ctx, "argocd/cart", []syncmedic.Finding{hookFinding("cart", "seed")})
	require.Eventually(t, func() bool {
		roots := srv.roots("seed")
		return len(roots) == 1 && len(srv.replies(roots[0].TS)) == 1
	}, 10*time.Second, 10*time.Millisecond, "a new incident after the restart is announced; nothing before it is repeated")
	third.stop()

	t.Run("one root message, in which every transition was posted once and in order", func(t *testing.T) {
		require.Len(t, srv.roots("migrate"), 1)
		replies := srv.replies(root.TS)
		require.Len(t, replies, 2)
		require.Contains(t, replies[0].Text, "Dry-run")
		require.Contains(t, replies[1].Text, "Resolved")
	})
	t.Run("nothing delivered is left in the store's outbox", func(t *testing.T) {
		stored, err := store.Load(ctx)
		require.NoError(t, err)
		for _, inc := range stored {
			require.Empty(t, inc.Outbox, inc.ID)
		}
	})
}
