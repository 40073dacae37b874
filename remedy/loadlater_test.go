package remedy

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/policy"
)

// flakyStore fails while down is set, and otherwise keeps what was saved.
type flakyStore struct {
	mu    sync.Mutex
	down  bool
	inner incident.MemoryStore
	saves int
}

var errStoreDown = errors.New("configmaps \"syncmedic-state\": dial tcp 127.0.0.1:6443: connect: connection refused")

func (s *flakyStore) Load(ctx context.Context) ([]incident.Incident, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errStoreDown
	}
	return s.inner.Load(ctx)
}

func (s *flakyStore) Save(ctx context.Context, incs []incident.Incident) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errStoreDown
	}
	s.saves++
	return s.inner.Save(ctx, incs)
}

func (s *flakyStore) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

func TestAStoreThatCannotBeReadAtStartDelaysAnnouncementsWithoutLosingThem(t *testing.T) {
	ctx := context.Background()
	t.Run("without LoadLater the failed first load is NewTracker's error", func(t *testing.T) {
		_, err := incident.NewTracker(ctx, incident.TrackerOptions{Store: &flakyStore{down: true}})
		require.ErrorIs(t, err, errStoreDown)
	})

	store := &flakyStore{}
	// An earlier run announced the incident and stored it.
	first := newTestTracker(t, incident.TrackerOptions{Store: store})
	first.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	require.Len(t, first.Incidents(), 1)

	store.setDown(true)
	evs := &events{}
	rem := &countingRemedier{}
	stage := NewRemediationStage(RemediationOptions{Remediers: syncmedic.Remediers{syncmedic.ActionRemoveHookFinalizer: rem}})
	p, err := policy.LoadPolicy([]byte(autoPolicy))
	require.NoError(t, err)
	tr, err := incident.NewTracker(ctx, incident.TrackerOptions{Store: store, LoadLater: true, Publisher: evs, Remediation: stage,
		Policy: func() *policy.Policy { return p }})
	require.NoError(t, err, "serve starts while the store is unreachable")
	require.ErrorIs(t, tr.StoreError(), errStoreDown)

	t.Run("while the store cannot be read nothing is announced, saved or remediated", func(t *testing.T) {
		tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate"), hookFinding("shop", "seed")})
		require.Empty(t, evs.kinds())
		real, dry := rem.calls()
		require.Zero(t, real+dry)
		require.Len(t, tr.Incidents(), 2, "it keeps tracking in memory")
		require.ErrorIs(t, tr.StoreError(), errStoreDown)
	})
	t.Run("once the store is back the incident announced before is not announced again, the new one is", func(t *testing.T) {
		store.setDown(false)
		tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate"), hookFinding("shop", "seed")})
		require.NoError(t, tr.StoreError())
		opened := 0
		for _, ev := range evs.evs {
			if ev.Kind == incident.EventOpened {
				opened++
				require.Contains(t, ev.Incident.Finding.Object.Name, "seed")
			}
		}
		require.Equal(t, 1, opened, "kinds: %v", evs.kinds())
		real, _ := rem.calls()
		require.Equal(t, 2, real, "both are remediated now that the tracker acts")
	})
}
