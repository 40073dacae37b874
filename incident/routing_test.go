package incident

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// routesFile holds the routes both the policy and the incident tests use.
const routesFile = "../policy/testdata/routes.yaml"

func TestAnIncidentKeepsTheRouteItOpenedWith(t *testing.T) {
	ctx := context.Background()
	p, err := policy.LoadPolicy(readFile(t, routesFile))
	require.NoError(t, err)
	evs, c := &events{}, newClock()
	tr := newTestTracker(t, TrackerOptions{Publisher: evs, Now: c.Now, Policy: func() *policy.Policy { return p }})
	f := hookFinding("shop", "migrate")
	f.Object.Project = "payments"
	tr.Observe(ctx, "s", []syncmedic.Finding{f})
	incs := tr.Incidents()
	require.Len(t, incs, 1)
	require.Equal(t, &policy.Routing{SlackChannel: "#payments-oncall", Reason: "route payments"}, incs[0].Route)

	t.Run("a reloaded policy does not move an open incident's thread", func(t *testing.T) {
		p2, err := policy.LoadPolicy([]byte("routes:\n  - match: {projects: [payments]}\n    slackChannel: '#elsewhere'\n"))
		require.NoError(t, err)
		p = p2
		c.Advance(1)
		tr.Observe(ctx, "s", []syncmedic.Finding{f})
		require.Equal(t, "#payments-oncall", tr.Incidents()[0].Route.SlackChannel)
	})
	t.Run("the route is in every event the notifiers get", func(t *testing.T) {
		evs.mu.Lock()
		defer evs.mu.Unlock()
		require.NotEmpty(t, evs.evs)
		for _, ev := range evs.evs {
			require.NotNil(t, ev.Incident.Route, "%s", ev.Kind)
		}
	})
}

// readFile returns the content of a test data file.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}
