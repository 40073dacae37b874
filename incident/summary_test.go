package incident

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestSameSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"identical summaries", "Job a/b is stuck", "Job a/b is stuck", true},
		{"only the age in seconds grew", "Operation on ns/app has been Running for 8s with no change", "Operation on ns/app has been Running for 17s with no change", true},
		{"the age crossed into minutes and hours", "Sync of ns/app has waited 59s for hook batch/Job/migrate", "Sync of ns/app has waited 1h5m for hook batch/Job/migrate", true},
		{"days", "Job ns/x has been terminating for 2d3h, held by a", "Job ns/x has been terminating for 3d, held by a", true},
		{"the phase changed", "Operation on ns/app has been Running for 8s with no change", "Operation on ns/app has been Terminating for 8s with no change", false},
		{"a name that looks like an age is not one", "Job ns/k8s is stuck", "Job ns/k9s is stuck", false},
		{"another object", "Job ns/a has been terminating for 3m, held by f", "Job ns/b has been terminating for 3m, held by f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.same, sameSummary(tc.a, tc.b))
		})
	}
}

func TestAGrowingAgeIsNotAnnouncedAsAnUpdate(t *testing.T) {
	pub := &events{}
	tr := newTestTracker(t, TrackerOptions{Publisher: pub})
	f := hookFinding("shop", "migrate")
	for _, age := range []string{"8s", "17s", "2m", "1h5m"} {
		f.Summary = "Operation on shop/app has been Running for " + age + " with no change"
		tr.Observe(context.Background(), "argocd/shop", []syncmedic.Finding{f})
	}
	require.Equal(t, []EventKind{EventOpened}, pub.kinds())
	require.Contains(t, tr.Incidents()[0].Finding.Summary, "1h5m", "the incident keeps the latest summary")
}
