package incident

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestADeletedSubjectResolvesAtOnce(t *testing.T) {
	ctx := context.Background()
	t.Run("the tracker resolves every open incident of a deleted subject without waiting for more evaluations", func(t *testing.T) {
		evs := &events{}
		tr := newTestTracker(t, TrackerOptions{Publisher: evs})
		tr.Observe(ctx, "argocd//argocd/shop", []syncmedic.Finding{hookFinding("shop", "migrate"), hookFinding("shop", "seed")})
		tr.Observe(ctx, "argocd//argocd/web", []syncmedic.Finding{hookFinding("web", "migrate")})

		syncmedic.ReportGone(ctx, tr, "argocd//argocd/shop")

		require.Equal(t, []EventKind{EventOpened, EventOpened, EventOpened, EventResolved, EventResolved}, evs.kinds())
		open := 0
		for _, inc := range tr.Incidents() {
			if inc.IsOpen() {
				open++
				require.Equal(t, "argocd//argocd/web", inc.Subject, "another subject's incident stays open")
			}
		}
		require.Equal(t, 1, open)
	})
	t.Run("a sink that cannot be told gets an evaluation with no findings", func(t *testing.T) {
		var got []string
		syncmedic.ReportGone(ctx, syncmedic.SinkFunc(func(_ context.Context, subject string, fs []syncmedic.Finding) {
			require.Empty(t, fs)
			got = append(got, subject)
		}), "flux/apps/redis")
		require.Equal(t, []string{"flux/apps/redis"}, got)
	})
}
