package incident

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/policy"
)

// metricText renders gathered metrics in the Prometheus text format.
func metricText(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range mfs {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		require.NoError(t, err)
	}
	return b.String()
}

// seriesOf returns the samples of the metric family name in reg, one text-format line each, sorted.
func seriesOf(t *testing.T, reg prometheus.Gatherer, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, line := range strings.Split(metricText(t, []*dto.MetricFamily{mf}), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out
}

func TestOpenIncidentSeriesFollowTheIncidents(t *testing.T) {
	ctx := context.Background()
	pol, err := policy.LoadPolicy([]byte("resolveAfter: 1\n"))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	tr := newTestTracker(t, TrackerOptions{Now: newClock().Now, Publisher: &events{}, Metrics: NewMetrics(reg),
		Policy: func() *policy.Policy { return pol }})
	const argoSubject, fluxSubject = "argocd/default/argocd/shop", "flux/apps/redis"
	release := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease",
		Namespace: "apps", Name: "redis"}, "retries exhausted")
	series := func() []string { return seriesOf(t, reg, "syncmedic_incident_open") }

	t.Run("an incident that opens adds a series naming its rule, severity, object and application", func(t *testing.T) {
		tr.Observe(ctx, argoSubject, []syncmedic.Finding{hookFinding("shop", "migrate")})
		tr.Observe(ctx, fluxSubject, []syncmedic.Finding{release})
		require.Equal(t, []string{
			`syncmedic_incident_open{app="redis",object_kind="HelmRelease",object_name="redis",object_namespace="apps",rule="flux/retries-exhausted",severity="` + release.Severity.String() + `"} 1`,
			`syncmedic_incident_open{app="shop",object_kind="Job",object_name="migrate",object_namespace="shop",rule="argocd/hook-finalizer-stuck",severity="critical"} 1`,
		}, series())
	})
	t.Run("an incident that resolves removes its series, and only its", func(t *testing.T) {
		tr.Observe(ctx, argoSubject, nil)
		got := series()
		require.Len(t, got, 1)
		require.Contains(t, got[0], `rule="flux/retries-exhausted"`)
		tr.Observe(ctx, fluxSubject, nil)
		require.Empty(t, series())
	})
	t.Run("the count of open incidents agrees", func(t *testing.T) {
		require.Equal(t, []string{"syncmedic_incidents_open 0"}, seriesOf(t, reg, "syncmedic_incidents_open"))
	})
}

func TestIncidentLabelsNameTheApplicationOrRelease(t *testing.T) {
	tests := []struct {
		name string
		obj  syncmedic.ObjectRef
		want []string
	}{
		{name: "an object of an Argo CD application is labelled with the application",
			obj:  syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Job", Namespace: "shop", Name: "migrate", App: "shop"},
			want: []string{"Job", "shop", "migrate", "shop"}},
		{name: "a HelmRelease is labelled with itself",
			obj:  syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Kind: "HelmRelease", Namespace: "apps", Name: "redis"},
			want: []string{"HelmRelease", "apps", "redis", "redis"}},
		{name: "an object a HelmRelease applied is labelled with the release",
			obj:  syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Kind: "Job", Namespace: "apps", Name: "redis-migrate", FluxOwner: "HelmRelease/apps/redis"},
			want: []string{"Job", "apps", "redis-migrate", "redis"}},
		{name: "a cluster object of neither has no application",
			obj:  syncmedic.ObjectRef{Tool: syncmedic.ToolKubernetes, Kind: "Webhook", Name: "policy.example.com"},
			want: []string{"Webhook", "", "policy.example.com", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := incidentLabels(syncmedic.Finding{Rule: syncmedic.RuleHookFinalizerStuck, Severity: syncmedic.SeverityWarning, Object: tt.obj})
			require.Equal(t, append([]string{string(syncmedic.RuleHookFinalizerStuck), "warning"}, tt.want...), got)
		})
	}
}

func TestBuildInfoNamesTheVersion(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	text := metricText(t, mfs)
	require.Contains(t, text, `syncmedic_build_info{goversion="`+runtime.Version()+`",revision="`)
	require.Contains(t, text, `version="`+syncmedic.Version+`"} 1`)
}
