package silence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

func TestMatchersAreAnchoredLikeAlertmanager(t *testing.T) {
	f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Job",
		Namespace: "shop", Name: "migrate", App: "my-shop-eu"}, "stuck")
	hr := syncmedic.NewFinding(syncmedic.RuleID("flux/helmrelease-stale-status"), syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Kind: "HelmRelease", Namespace: "apps", Name: "podinfo"}, "stale")
	tests := []struct {
		name    string
		f       syncmedic.Finding
		matcher Matcher
		want    bool
	}{
		{"an exact value matches itself", f, Matcher{Name: LabelName, Value: "migrate"}, true},
		{"an exact value is not a prefix", f, Matcher{Name: LabelName, Value: "migr"}, false},
		{"a regex matches the whole value", f, Matcher{Name: LabelApp, Value: "my-shop-.*", IsRegex: true}, true},
		{"a regex is anchored at the start", f, Matcher{Name: LabelApp, Value: "shop-.*", IsRegex: true}, false},
		{"a regex is anchored at the end", f, Matcher{Name: LabelApp, Value: "my-shop", IsRegex: true}, false},
		{"an alternation is anchored as a whole", f, Matcher{Name: LabelNamespace, Value: "shop|billing", IsRegex: true}, true},
		{"the rule is matched", f, Matcher{Name: LabelRule, Value: "argocd/.*", IsRegex: true}, true},
		{"a HelmRelease is the app of its own finding", hr, Matcher{Name: LabelApp, Value: "podinfo"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Silence{Matchers: []Matcher{tt.matcher}, StartsAt: time.Unix(0, 0), EndsAt: time.Unix(60, 0), CreatedBy: "a", Comment: "c"}
			require.NoError(t, s.Validate())
			require.Equal(t, tt.want, s.Matches(LabelsOf(tt.f)))
		})
	}
}

func TestSilenceStatesAndRequest(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	s, err := DecodeRequest([]byte(`{"matchers": [{"name": "app", "value": "shop"}], "startsAt": "2026-03-10T13:00:00Z", "duration": "1h", "comment": "c"}`), "alice", now)
	require.NoError(t, err)
	require.NoError(t, s.Validate())
	require.Equal(t, StatePending, s.State(now))
	require.Equal(t, StateActive, s.State(now.Add(90*time.Minute)))
	require.Equal(t, StateExpired, s.State(now.Add(2*time.Hour)))
	_, err = DecodeRequest([]byte(`{"duration": "1h", "endsAt": "2026-03-10T13:00:00Z"}`), "alice", now)
	require.ErrorContains(t, err, "either endsAt or duration")
}
