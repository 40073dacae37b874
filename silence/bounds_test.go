package silence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

// webOf returns a finding about the Job migrate of an Argo CD Application web in appNamespace and project.
func webOf(appNamespace, project string) syncmedic.Finding {
	return syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Job",
		Namespace: "web", Name: "migrate", App: "web", AppNamespace: appNamespace, Project: project}, "stuck")
}

// A silence made for team-a's Application web (as the incident's Silence… or a scoped request makes it) mutes
// neither team-b's web nor a HelmRelease web nor an object that HelmRelease applied.
func TestSilenceOfOneAppMutesNoOtherAppOfTheSameName(t *testing.T) {
	teamA := webOf("argocd", "team-a")
	helmRelease := syncmedic.NewFinding(syncmedic.RuleID("flux/helmrelease-stale-status"), syncmedic.ObjectRef{Tool: syncmedic.ToolFlux,
		Kind: "HelmRelease", Namespace: "web", Name: "web"}, "stale")
	applied := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Kind: "Job",
		Namespace: "web", Name: "migrate", FluxOwner: "HelmRelease/web/web"}, "stuck")
	pinned := Silence{Matchers: []Matcher{{Name: LabelApp, Value: "web"}, {Name: LabelAppNamespace, Value: "argocd"},
		{Name: LabelProject, Value: "team-a"}}, StartsAt: time.Unix(0, 0), EndsAt: time.Unix(60, 0), CreatedBy: "a", Comment: "c"}
	require.NoError(t, pinned.Validate())
	incidentOf := Silence{Matchers: ForFinding(teamA), StartsAt: time.Unix(0, 0), EndsAt: time.Unix(60, 0), CreatedBy: "a", Comment: "c"}
	require.NoError(t, incidentOf.Validate())
	require.Equal(t, []Matcher{{Name: LabelRule, Value: string(syncmedic.RuleHookFinalizerStuck)}, {Name: LabelNamespace, Value: "web"},
		{Name: LabelKind, Value: "Job"}, {Name: LabelApp, Value: "web"}, {Name: LabelAppNamespace, Value: "argocd"},
		{Name: LabelProject, Value: "team-a"}, {Name: LabelName, Value: "migrate"}}, incidentOf.Matchers)
	require.Equal(t, Labels{LabelRule: string(syncmedic.RuleHookFinalizerStuck), LabelNamespace: "web", LabelKind: "Job",
		LabelApp: "web", LabelAppNamespace: "web", LabelProject: "", LabelName: "migrate"}, LabelsOf(applied))

	tests := []struct {
		name string
		f    syncmedic.Finding
		want bool
	}{
		{"team-a's web", teamA, true},
		{"team-b's web in the same namespace", webOf("argocd", "team-b"), false},
		{"a web in another Application namespace", webOf("team-a-apps", "team-a"), false},
		{"a HelmRelease web", helmRelease, false},
		{"an object the HelmRelease web applied", applied, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, pinned.Matches(LabelsOf(tt.f)), "the silence pinned to team-a's web")
			require.Equal(t, tt.want, incidentOf.Matches(LabelsOf(tt.f)), "the silence of team-a's incident")
		})
	}
	// A silence stored before the labels existed (app only) still matches every web, as it did.
	old := Silence{Matchers: []Matcher{{Name: LabelApp, Value: "web"}}, StartsAt: time.Unix(0, 0), EndsAt: time.Unix(60, 0), CreatedBy: "a", Comment: "c"}
	require.NoError(t, old.Validate())
	for _, f := range []syncmedic.Finding{teamA, webOf("argocd", "team-b"), helmRelease, applied} {
		require.True(t, old.Matches(LabelsOf(f)), f.Object.String())
	}
}

func TestPinsAndTargeted(t *testing.T) {
	m := func(name, value string, regex bool) Matcher { return Matcher{Name: name, Value: value, IsRegex: regex} }
	tests := []struct {
		name           string
		matchers       []Matcher
		pins, targeted bool
	}{
		{"app, namespace and project exactly", []Matcher{m(LabelApp, "web", false), m(LabelAppNamespace, "argocd", false), m(LabelProject, "team-a", false)}, true, true},
		{"narrowed further by rule", []Matcher{m(LabelRule, "argocd/.*", true), m(LabelApp, "web", false), m(LabelAppNamespace, "argocd", false), m(LabelProject, "team-a", false)}, true, true},
		{"app only", []Matcher{m(LabelApp, "web", false)}, false, true},
		{"the project by regex", []Matcher{m(LabelApp, "web", false), m(LabelAppNamespace, "argocd", false), m(LabelProject, "team-.*", true)}, false, true},
		{"another project", []Matcher{m(LabelApp, "web", false), m(LabelAppNamespace, "argocd", false), m(LabelProject, "team-b", false)}, false, true},
		{"the object's name", []Matcher{m(LabelName, "migrate", false)}, false, true},
		{"every rule", []Matcher{m(LabelRule, ".*", true)}, false, false},
		{"every app by regex", []Matcher{m(LabelApp, ".*", true), m(LabelName, ".+", true)}, false, false},
		{"an empty app", []Matcher{m(LabelApp, "", false)}, false, false},
		{"a namespace", []Matcher{m(LabelNamespace, "web", false), m(LabelProject, "team-a", false)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Silence{Matchers: tt.matchers}
			require.Equal(t, tt.pins, s.Pins("web", "argocd", "team-a"), "Pins")
			require.Equal(t, tt.targeted, s.Targeted(), "Targeted")
		})
	}
}

func TestParseDurationTakesDaysLikeAmtool(t *testing.T) {
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "1.5h": 90 * time.Minute, "7d": 7 * 24 * time.Hour,
		"1w": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour} {
		got, err := ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseDuration("a week")
	require.EqualError(t, err, `"a week" is not a duration: want a Go duration such as "30m" or "2h", or days and weeks such as "7d" or "1w"`)
	require.Equal(t, "7d", FormatDuration(7*24*time.Hour))
	require.Equal(t, "1d12h0m0s", FormatDuration(36*time.Hour))
	require.Equal(t, "2h0m0s", FormatDuration(2*time.Hour))
	s, err := DecodeRequest([]byte(`{"matchers": [{"name": "app", "value": "web"}], "duration": "8d", "comment": "c"}`), "alice", time.Unix(0, 0))
	require.NoError(t, err)
	require.Equal(t, 8*24*time.Hour, s.EndsAt.Sub(s.StartsAt))
}
