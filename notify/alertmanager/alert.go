package alertmanager

import (
	"net/url"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// AlertName is the alertname label of every alert syncmedic posts; the rule label tells them apart.
const AlertName = "SyncmedicIncident"

// Alert is what Alertmanager's API accepts (its models.PostableAlert, in JSON): the labels identify the alert, and
// an endsAt in the past resolves it.
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitempty"`
	EndsAt       time.Time         `json:"endsAt,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// NewAlert renders inc as an alert. An open incident ends at expires (Alertmanager resolves it by itself then,
// unless it is posted again first); a resolved one ends when it resolved.
//
// Labels (stable for the incident's life, so every post updates the same alert): alertname, incident, rule,
// severity, tool, kind, namespace, name, and when known app, project, app_namespace, argocd_instance,
// flux_owner, release (the Flux HelmRelease: the object itself, or the one that applied it), subject. Annotations: summary, description, evidence, plan, fix (the `syncmedic fix` command),
// commands (the manual ones), runbook_url (the rule's documentation).
func NewAlert(inc incident.Incident, expires time.Time) Alert {
	f := inc.Finding
	o := f.Object
	a := Alert{Labels: map[string]string{}, Annotations: map[string]string{}, StartsAt: inc.OpenedAt.UTC(), EndsAt: expires.UTC()}
	set(a.Labels, "alertname", AlertName)
	set(a.Labels, "incident", inc.ID)
	set(a.Labels, "rule", string(f.Rule))
	set(a.Labels, "severity", f.Severity.String())
	set(a.Labels, "tool", o.Tool)
	set(a.Labels, "kind", o.Kind)
	set(a.Labels, "namespace", o.Namespace)
	set(a.Labels, "name", o.Name)
	set(a.Labels, "app", o.App)
	set(a.Labels, "app_namespace", o.AppNamespace)
	set(a.Labels, "project", o.Project)
	set(a.Labels, "argocd_instance", o.Instance)
	set(a.Labels, "flux_owner", o.FluxOwner)
	_, rel, _ := o.HelmRelease()
	set(a.Labels, "release", rel)
	set(a.Labels, "subject", inc.Subject)

	set(a.Annotations, "summary", f.Summary)
	set(a.Annotations, "description", inc.Title()+": "+o.String())
	evidence := make([]string, 0, len(f.Evidence))
	for _, e := range f.Evidence {
		line := e.String()
		if e.Since != nil && e.Value != e.Since.UTC().Format(time.RFC3339) {
			line += " (since " + e.Since.UTC().Format(time.RFC3339) + ")"
		}
		evidence = append(evidence, line)
	}
	set(a.Annotations, "evidence", strings.Join(evidence, "\n"))
	set(a.Annotations, "plan", inc.Plan)
	if inc.IsOpen() && f.Remedy.Action != syncmedic.ActionNone {
		set(a.Annotations, "fix", syncmedic.FixCommand(inc.ID))
	}
	set(a.Annotations, "commands", strings.Join(f.Remedy.Commands, "\n"))
	if r, ok := syncmedic.LookupRule(f.Rule); ok {
		set(a.Annotations, "runbook_url", r.DocsURL())
	}
	for _, l := range f.Links {
		if u, err := url.Parse(l.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			a.GeneratorURL = l.URL
			break
		}
	}
	if !inc.IsOpen() {
		a.EndsAt = inc.UpdatedAt.UTC()
		if inc.ResolvedAt != nil {
			a.EndsAt = inc.ResolvedAt.UTC()
		}
	}
	if a.EndsAt.Before(a.StartsAt) {
		a.EndsAt = a.StartsAt // Alertmanager refuses an alert that ends before it starts
	}
	return a
}

// set keeps only non-empty values: Alertmanager treats an empty label as absent.
func set(m map[string]string, k, v string) {
	if v = strings.TrimSpace(v); v != "" {
		m[k] = v
	}
}
