package ui

import (
	"sort"
	"time"

	"github.com/syncmedic/syncmedic/incident"
)

// APIVersion names the shape of every response of the incident API. It changes only when a field is removed or
// changes meaning; new fields may appear in the same version.
const APIVersion = "syncmedic.io/v1"

// IncidentList is the answer to GET /api/v1/incidents.
type IncidentList struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Items      []Incident `json:"items"`
}

// Incident is one incident as the API shows it: what is stuck, why syncmedic thinks so, the fix, and what was done.
// It is a view of incident.Incident that leaves out what notifiers keep for themselves (Slack threads, delivery
// state) and the remedy's internal parameters.
type Incident struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Rule     string `json:"rule"`
	Title    string `json:"title"`
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Object   Object `json:"object"`
	// App is the Argo CD Application managing the object, when there is one.
	App *App `json:"app,omitempty"`
	// RelatedApps are the Argo CD Applications the incident is also about: those holding an ApplicationSet's
	// stalled rollout step. An Argo CD proxy request of one of them sees the incident.
	RelatedApps []App `json:"relatedApps,omitempty"`
	// FluxOwner is the Flux object that applied the object, as "Kind/namespace/name".
	FluxOwner string `json:"fluxOwner,omitempty"`
	// Since is when the stuck condition started, when known.
	Since      *time.Time `json:"since,omitempty"`
	OpenedAt   time.Time  `json:"openedAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
	// Plan says what syncmedic does about it under the current policy; Auto is true when it acts unattended.
	Plan       string     `json:"plan,omitempty"`
	Auto       bool       `json:"auto"`
	Evidence   []Evidence `json:"evidence"`
	Remedy     Remedy     `json:"remedy"`
	Links      []Link     `json:"links"`
	Advisories []string   `json:"advisories"`
	Attempts   []Attempt  `json:"attempts"`
	// Timeline is the audit trail: opened, every remediation attempt, resolved, in order.
	Timeline []TimelineEntry `json:"timeline"`
	// Fix says whether the caller may apply the remedy on demand (POST .../fix); absent when this syncmedic
	// offers no fix on demand or the incident has no remedy it can apply.
	Fix *FixAccess `json:"fix,omitempty"`
	// Ack says who took the incident and when (POST .../ack); absent while nobody has.
	Ack *Ack `json:"ack,omitempty"`
	// SilencedBy is the ID of the active silence that mutes the incident: shown, but neither announced nor
	// remedied automatically. Unannounced is true while a silence has kept it from the notifiers.
	SilencedBy  string `json:"silencedBy,omitempty"`
	Unannounced bool   `json:"unannounced,omitempty"`
	// AckAccess and SilenceAccess say whether the caller may acknowledge the incident and create silences; absent
	// when this syncmedic offers neither.
	AckAccess     *FixAccess `json:"acknowledge,omitempty"`
	SilenceAccess *FixAccess `json:"silence,omitempty"`
}

// Ack is who acknowledged an incident, when, and whom they took it over from.
type Ack struct {
	By            string    `json:"by"`
	At            time.Time `json:"at"`
	TakenOverFrom string    `json:"takenOverFrom,omitempty"`
}

// FixAccess is the caller's permission to fix an incident on demand under the policy's fixBy.
type FixAccess struct {
	Allowed bool `json:"allowed"`
	// Reason says why not, when not allowed.
	Reason string `json:"reason,omitempty"`
}

// Object names the object an incident is about.
type Object struct {
	Tool      string `json:"tool"`
	Instance  string `json:"instance,omitempty"`
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// App is an Argo CD Application.
type App struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Project   string `json:"project,omitempty"`
}

// Evidence is one observed fact: a field, its value, and since when it holds.
type Evidence struct {
	Field string     `json:"field"`
	Value string     `json:"value"`
	Since *time.Time `json:"since,omitempty"`
}

// Remedy is the fix: the action syncmedic can apply and the commands a person can run instead.
type Remedy struct {
	Action      string   `json:"action,omitempty"`
	AutoSafe    bool     `json:"autoSafe"`
	RerunsHooks bool     `json:"rerunsHooks"`
	Description string   `json:"description"`
	Commands    []string `json:"commands"`
}

// Link is a URL worth opening.
type Link struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// Attempt is one remediation, applied or only planned (result "dry-run").
type Attempt struct {
	At        time.Time `json:"at"`
	Action    string    `json:"action"`
	Result    string    `json:"result"`
	Changed   bool      `json:"changed"`
	Steps     []string  `json:"steps"`
	Reason    string    `json:"reason,omitempty"`
	Error     string    `json:"error,omitempty"`
	Permanent bool      `json:"permanent"`
	// RequestedBy names the person who asked for this fix on demand; empty for an automatic one.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// TimelineEntry is one event in an incident's life.
type TimelineEntry struct {
	At time.Time `json:"at"`
	// Kind is "opened", "remediation", "acknowledged" or "resolved".
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// newIncident builds the API view of inc.
func newIncident(inc incident.Incident) Incident {
	f := inc.Finding
	out := Incident{
		ID: inc.ID, State: string(inc.State), Rule: string(f.Rule), Title: inc.Title(), Severity: f.Severity.String(),
		Summary: f.Summary,
		Object: Object{Tool: f.Object.Tool, Instance: f.Object.Instance, Group: f.Object.Group, Version: f.Object.Version,
			Kind: f.Object.Kind, Namespace: f.Object.Namespace, Name: f.Object.Name},
		FluxOwner: f.Object.FluxOwner, OpenedAt: inc.OpenedAt, UpdatedAt: inc.UpdatedAt, ResolvedAt: inc.ResolvedAt,
		Plan: inc.Plan, Auto: inc.Auto,
		Evidence:   make([]Evidence, 0, len(f.Evidence)),
		Remedy:     Remedy{Action: string(f.Remedy.Action), AutoSafe: f.Remedy.AutoSafe, RerunsHooks: f.Remedy.RerunsHooks, Description: f.Remedy.Description, Commands: nonNil(f.Remedy.Commands)},
		Links:      make([]Link, 0, len(f.Links)),
		Advisories: nonNil(f.Advisories),
		Attempts:   make([]Attempt, 0, len(inc.Attempts)),
	}
	if f.Object.App != "" {
		out.App = &App{Name: f.Object.App, Namespace: f.Object.AppNamespace, Project: f.Object.Project}
	}
	for _, r := range f.Related {
		if r.Kind == "Application" && r.App != "" {
			out.RelatedApps = append(out.RelatedApps, App{Name: r.App, Namespace: r.AppNamespace, Project: r.Project})
		}
	}
	if !f.Since.IsZero() {
		s := f.Since
		out.Since = &s
	}
	for _, e := range f.Evidence {
		out.Evidence = append(out.Evidence, Evidence{Field: e.Field, Value: e.Value, Since: e.Since})
	}
	for _, l := range f.Links {
		out.Links = append(out.Links, Link(l))
	}
	for _, a := range inc.Attempts {
		out.Attempts = append(out.Attempts, Attempt{At: a.At, Action: string(a.Action), Result: string(a.Result),
			Changed: a.Changed, Steps: nonNil(a.Steps), Reason: a.Reason, Error: a.Error, Permanent: a.Permanent, RequestedBy: a.RequestedBy})
	}
	if inc.Ack != nil {
		out.Ack = &Ack{By: inc.Ack.By, At: inc.Ack.At, TakenOverFrom: inc.Ack.TakenOverFrom}
	}
	out.SilencedBy, out.Unannounced = inc.SilencedBy, inc.Unannounced
	out.Timeline = timeline(inc)
	return out
}

// timeline derives the audit trail from the incident's times and attempts.
func timeline(inc incident.Incident) []TimelineEntry {
	t := []TimelineEntry{{At: inc.OpenedAt, Kind: "opened", Text: inc.Finding.Summary}}
	for _, a := range inc.Attempts {
		text := string(a.Action) + ": " + string(a.Result)
		if a.RequestedBy != "" {
			text += " (requested by " + a.RequestedBy + ")"
		}
		switch {
		case a.Error != "":
			text += " — " + a.Error
		case a.Reason != "" && a.RequestedBy == "": // a person's request: the reason only repeats who asked
			text += " — " + a.Reason
		}
		t = append(t, TimelineEntry{At: a.At, Kind: "remediation", Text: text})
	}
	if a := inc.Ack; a != nil {
		text := "acknowledged by " + a.By
		if a.TakenOverFrom != "" {
			text += ", taking over from " + a.TakenOverFrom
		}
		t = append(t, TimelineEntry{At: a.At, Kind: "acknowledged", Text: text})
	}
	if inc.ResolvedAt != nil {
		t = append(t, TimelineEntry{At: *inc.ResolvedAt, Kind: "resolved", Text: "the rule stopped matching"})
	}
	sort.SliceStable(t, func(i, j int) bool { return t[i].At.Before(t[j].At) })
	return t
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
