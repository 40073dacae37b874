package incident

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/syncmedic/syncmedic/silence"
)

func storedSilence(id string) silence.Silence {
	return silence.Silence{ID: id, Matchers: []silence.Matcher{{Name: "app", Value: "shop"}}, StartsAt: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC),
		EndsAt: time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC), CreatedBy: "alice", Comment: "c"}
}

// The ConfigMap store keeps silences in a ConfigMap of their own: saving incidents leaves them, saving silences
// leaves the incidents, and the state ConfigMap holds no silence.
func TestConfigMapStoreKeepsSilencesInTheirOwnConfigMap(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	s := &ConfigMapStore{Client: client, Namespace: "syncmedic", Name: "syncmedic-state"}
	ss, err := s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Empty(t, ss, "no ConfigMap: no silences")

	sil := storedSilence("s1")
	require.NoError(t, s.SaveSilences(ctx, []silence.Silence{sil}), "creates the silences' ConfigMap")
	require.NoError(t, s.Save(ctx, []Incident{{ID: "a-1", Fingerprint: "a", State: StateFiring}}))
	ss, err = s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Equal(t, []silence.Silence{sil}, ss)
	state, err := client.CoreV1().ConfigMaps("syncmedic").Get(ctx, "syncmedic-state", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{ConfigMapDataKey}, keys(state.Data))
	own, err := client.CoreV1().ConfigMaps("syncmedic").Get(ctx, "syncmedic-state-silences", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{ConfigMapSilencesKey}, keys(own.Data))

	require.NoError(t, s.SaveSilences(ctx, nil))
	incs, err := s.Load(ctx)
	require.NoError(t, err)
	require.Len(t, incs, 1)
	ss, err = s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Empty(t, ss)
}

// Silences an earlier syncmedic kept in the state ConfigMap move to their own ConfigMap on load, the incidents left
// as they were; when another replica moved them first, its ConfigMap wins.
func TestConfigMapStoreMovesSilencesFromTheStateConfigMap(t *testing.T) {
	ctx := context.Background()
	legacy, err := encodeSilences([]silence.Silence{storedSilence("old")})
	require.NoError(t, err)
	incidents := `{"version":1,"incidents":[{"id":"a-1","fingerprint":"a","state":"firing"}]}`
	stateCM := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "syncmedic", Name: "syncmedic-state"},
			Data: map[string]string{ConfigMapDataKey: incidents, ConfigMapSilencesKey: string(legacy)}}
	}

	client := fake.NewSimpleClientset(stateCM())
	s := &ConfigMapStore{Client: client, Namespace: "syncmedic", Name: "syncmedic-state"}
	ss, err := s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Equal(t, []silence.Silence{storedSilence("old")}, ss)
	state, err := client.CoreV1().ConfigMaps("syncmedic").Get(ctx, "syncmedic-state", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{ConfigMapDataKey: incidents}, state.Data, "the silences left the state ConfigMap, the incidents stayed")
	own, err := client.CoreV1().ConfigMaps("syncmedic").Get(ctx, "syncmedic-state-silences", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, string(legacy), own.Data[ConfigMapSilencesKey])
	ss, err = s.LoadSilences(ctx)
	require.NoError(t, err)
	require.Equal(t, []silence.Silence{storedSilence("old")}, ss, "loaded again from their own ConfigMap")

	t.Run("another replica moved them first", func(t *testing.T) {
		moved, err := encodeSilences([]silence.Silence{storedSilence("old"), storedSilence("new")})
		require.NoError(t, err)
		client := fake.NewSimpleClientset(stateCM())
		s := &ConfigMapStore{Client: client, Namespace: "syncmedic", Name: "syncmedic-state"}
		b, err := s.migrateSilences(ctx)
		require.NoError(t, err)
		require.Equal(t, legacy, b)
		_, err = client.CoreV1().ConfigMaps("syncmedic").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "syncmedic",
			Name: "syncmedic-state-silences"}, Data: map[string]string{ConfigMapSilencesKey: string(moved)}}, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err = client.CoreV1().ConfigMaps("syncmedic").Update(ctx, stateCM(), metav1.UpdateOptions{}) // a stale replica's view
		require.NoError(t, err)
		b, err = s.migrateSilences(ctx)
		require.NoError(t, err)
		require.Equal(t, moved, b, "the silences' ConfigMap is not overwritten with the older silences")
		state, err := client.CoreV1().ConfigMaps("syncmedic").Get(ctx, "syncmedic-state", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, map[string]string{ConfigMapDataKey: incidents}, state.Data)
	})
	t.Run("stored silences that cannot be read are an error naming the ConfigMap", func(t *testing.T) {
		bad := stateCM()
		bad.Data[ConfigMapSilencesKey] = `{"version": 9}`
		s := &ConfigMapStore{Client: fake.NewSimpleClientset(bad), Namespace: "syncmedic", Name: "syncmedic-state"}
		_, err := s.LoadSilences(ctx)
		require.EqualError(t, err, "ConfigMap syncmedic/syncmedic-state key silences.json: silence store version 9: this syncmedic reads version 1")
	})
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
