package incident

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/syncmedic/syncmedic/silence"
)

// The ConfigMap store keeps silences under their own key: saving incidents leaves them, and saving silences leaves
// the incidents.
func TestConfigMapStoreKeepsSilencesBesideTheIncidents(t *testing.T) {
	ctx := context.Background()
	s := &ConfigMapStore{Client: fake.NewSimpleClientset(), Namespace: "syncmedic", Name: "syncmedic-state"}
	ss, err := s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Empty(t, ss, "no ConfigMap: no silences")

	sil := silence.Silence{ID: "s1", Matchers: []silence.Matcher{{Name: "app", Value: "shop"}}, StartsAt: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		EndsAt: time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC), CreatedBy: "alice", Comment: "c"}
	require.NoError(t, s.SaveSilences(ctx, []silence.Silence{sil}), "creates the ConfigMap")
	require.NoError(t, s.Save(ctx, []Incident{{ID: "a-1", Fingerprint: "a", State: StateFiring}}))
	ss, err = s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Equal(t, []silence.Silence{sil}, ss)
	require.NoError(t, s.SaveSilences(ctx, nil))
	incs, err := s.Load(ctx)
	require.NoError(t, err)
	require.Len(t, incs, 1)
	ss, err = s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Empty(t, ss)
}
