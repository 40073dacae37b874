package policy

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic"
)

// routesFile holds the routes both the policy and the incident tests use.
const routesFile = "testdata/routes.yaml"

func fluxFinding(ns, name string, sev syncmedic.Severity, labels map[string]string) syncmedic.Finding {
	f := syncmedic.NewFinding(syncmedic.RuleRetriesExhausted, syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: "helm.toolkit.fluxcd.io", Version: "v2",
		Kind: "HelmRelease", Namespace: ns, Name: name, Labels: labels}, "HelmRelease "+name+" is out of retries")
	f.Severity = sev
	return f
}

func TestRoutesSendEachIncidentWhereItsTeamLooks(t *testing.T) {
	p, err := LoadPolicy(readFile(t, routesFile))
	require.NoError(t, err)
	payments := hookFinding("shop", "migrate")
	payments.Object.Project = "payments"
	annotated := payments
	annotated.Object.SlackChannel = "#checkout-team"
	data := hookFinding("etl", "backfill")
	data.Object.Labels = map[string]string{"team": "data-eng"}
	dataWrongRule := fluxFinding("etl", "warehouse", syncmedic.SeverityCritical, map[string]string{"team": "data-eng"})
	for _, tc := range []struct {
		name string
		f    syncmedic.Finding
		want *Routing
	}{
		{"an Application of project payments goes to the payments channel", payments,
			&Routing{SlackChannel: "#payments-oncall", Reason: "route payments"}},
		{"the Application's own slack-channel annotation wins over the route", annotated,
			&Routing{SlackChannel: "#checkout-team", Reason: "annotation syncmedic.io/slack-channel on Application shop"}},
		{"a critical HelmRelease named ingress-* goes to #platform through Slack and Alertmanager only",
			fluxFinding("edge", "ingress-nginx", syncmedic.SeverityCritical, nil),
			&Routing{SlackChannel: "#platform", Receivers: []string{"slack", "alertmanager"}, Reason: "route platform-flux"}},
		{"the same release at warning severity matches no route", fluxFinding("edge", "ingress-nginx", syncmedic.SeverityWarning, nil), nil},
		{"a hook of an Application labelled team=data-eng goes to the webhook only", data,
			&Routing{Receivers: []string{"webhook"}, Reason: "route 3"}},
		{"a label match does not apply to a rule the route does not list", dataWrongRule, nil},
		{"an incident no route matches goes everywhere", hookFinding("other", "job"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, p.Route(tc.f))
		})
	}
}

func TestRoutingAllowsOnlyItsReceivers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        *Routing
		receiver string
		want     bool
	}{
		{"no routing allows every destination", nil, "webhook", true},
		{"a routing without receivers allows every destination", &Routing{SlackChannel: "#x"}, "webhook", true},
		{"a listed receiver is allowed", &Routing{Receivers: []string{"slack", "webhook"}}, "webhook", true},
		{"an unlisted receiver is not", &Routing{Receivers: []string{"slack"}}, "kubernetes-events", false},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.r.Allows(tc.receiver)) })
	}
}

func TestBadRoutesAreRefusedWithTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"a route that changes nothing", "routes:\n  - match: {projects: [a]}\n", "routes[0]: sets neither slackChannel nor receivers"},
		{"an unknown receiver", "routes:\n  - receivers: [pagerduty]\n", `routes[0].receivers: unknown receiver "pagerduty", want one of alertmanager, kubernetes-events, slack, slack-webhook, webhook`},
		{"a broken glob", "routes:\n  - match: {apps: ['[a']}\n    slackChannel: x\n", `routes[0].match.apps: "[a" is not a glob pattern`},
		{"an unknown severity", "routes:\n  - match: {severities: [urgent]}\n    slackChannel: x\n", `routes[0].match.severities: unknown severity "urgent"`},
		{"a misspelt field", "routes:\n  - match: {project: [a]}\n    slackChannel: x\n", `unknown field "project"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPolicy([]byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// readFile returns the content of a test data file.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}
