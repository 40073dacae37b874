package remedy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/silence"
)

// A silenced incident with an auto rule is not acted on, not even when a request for it reaches the stage (one
// queued before the silence was created).
func TestSilencedIncidentIsNotRemediated(t *testing.T) {
	ctx := context.Background()
	r := newRemediationRig(t, autoPolicy)
	_, err := r.tr.CreateSilence(ctx, silence.Silence{Matchers: []silence.Matcher{{Name: "app", Value: "shop"}},
		EndsAt: r.clock.Now().Add(time.Hour), CreatedBy: "alice", Comment: "maintenance"})
	require.NoError(t, err)
	r.tr.Observe(ctx, "s", []syncmedic.Finding{hookFinding("shop", "migrate")})
	id := r.tr.Incidents()[0].ID
	r.stage.Submit(ctx, r.tr, id)
	real, dry := r.rem.calls()
	require.Zero(t, real, "no automatic remedy while silenced")
	require.Zero(t, dry, "no dry-run record either")
	require.Empty(t, r.evs.kinds())
	inc, _ := r.tr.Get(id)
	require.Empty(t, inc.Attempts)
}
