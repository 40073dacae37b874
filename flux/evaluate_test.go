package flux

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
)

func TestNextThreshold(t *testing.T) {
	th := DefaultThresholds()
	tests := []struct {
		name   string
		hr     func() *ReleaseObservation
		wantAt time.Time
		want   bool
	}{
		{
			name: "a release with an unobserved generation is re-evaluated when the stale-status threshold passes",
			hr: func() *ReleaseObservation {
				return &ReleaseObservation{Release: release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", time.Minute))}
			},
			wantAt: now.Add(-time.Minute).Add(th.StaleStatus), want: true,
		},
		{
			name: "a release waiting on a dependency is re-evaluated when the DependencyNotReady threshold passes",
			hr: func() *ReleaseObservation {
				return &ReleaseObservation{Release: release("api", 7, 7, cond(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, "dependency 'apps/postgres' is not ready", time.Minute))}
			},
			wantAt: now.Add(-time.Minute).Add(th.DependencyNotReady), want: true,
		},
		{
			name: "a release past every threshold arms no timer",
			hr: func() *ReleaseObservation {
				return &ReleaseObservation{Release: release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", time.Hour))}
			},
		},
		{
			name: "a healthy release arms no timer",
			hr: func() *ReleaseObservation {
				return &ReleaseObservation{Release: release("redis", 3, 3, cond(meta.ReadyCondition, "True", "UpgradeSucceeded", "ok", time.Minute))}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, ok := nextThreshold(tt.hr().Release, tt.hr().Dependencies, now, th)
			require.Equal(t, tt.want, ok)
			require.True(t, tt.wantAt.Equal(at), "want %s, got %s", tt.wantAt, at)
		})
	}
}

func TestThresholdWarnings(t *testing.T) {
	t.Run("the default DependencyNotReady threshold is well past helm-controller's re-check", func(t *testing.T) {
		require.Empty(t, DefaultThresholds().Warnings())
	})
	t.Run("a threshold inside the re-check window is called out", func(t *testing.T) {
		th := DefaultThresholds()
		th.DependencyNotReady = 45 * time.Second
		w := th.Warnings()
		require.Len(t, w, 1)
		require.Contains(t, w[0], "a dependency chain still starting up may be reported")
	})
}
