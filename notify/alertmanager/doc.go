// Package alertmanager posts each incident as an alert to Prometheus Alertmanager's API (POST /api/v2/alerts), so
// that the routes, silences and receivers (PagerDuty, Opsgenie, Teams, …) a team already runs take it from there:
// labels from the incident, firing while it is open and re-posted before its endsAt, resolved when it resolves.
package alertmanager
