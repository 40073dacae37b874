package policy

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/syncmedic/syncmedic"
)

// Receiver names, as serve names its notification destinations; a route's receivers list some of them.
var knownReceivers = []string{"alertmanager", "kubernetes-events", "slack", "slack-webhook", "webhook"}

// Route sends the incidents it matches to a Slack channel and/or only some of the destinations. Routes are tried in
// order and the first that matches decides, as in Alertmanager; an incident no route matches goes everywhere, to
// --slack-channel.
type Route struct {
	// Name is shown in the incident's routing reason ("route payments"); default: its position ("route 2").
	Name  string     `json:"name,omitempty"`
	Match RouteMatch `json:"match,omitempty"`
	// SlackChannel overrides --slack-channel for the matched incidents (one thread per incident in that channel).
	SlackChannel string `json:"slackChannel,omitempty"`
	// Receivers are the destinations the matched incidents go to (slack, slack-webhook, webhook,
	// kubernetes-events, alertmanager); empty: all of them.
	Receivers []string `json:"receivers,omitempty"`
}

// RouteMatch selects incidents; every field set must match (glob patterns as in path.Match, any of a list).
type RouteMatch struct {
	Rules      []string `json:"rules,omitempty"`
	Severities []string `json:"severities,omitempty"`
	// Namespaces match the stuck object's namespace or its Application's namespace.
	Namespaces []string `json:"namespaces,omitempty"`
	// Projects and Apps match the Argo CD Application; Releases the Flux HelmRelease (as name or namespace/name).
	Projects []string `json:"projects,omitempty"`
	Apps     []string `json:"apps,omitempty"`
	Releases []string `json:"releases,omitempty"`
	// Labels must all be on the Application or HelmRelease (values are glob patterns).
	Labels map[string]string `json:"labels,omitempty"`
}

// Routing is where an incident's notifications go, decided when it opens (so its thread stays in one channel).
type Routing struct {
	SlackChannel string   `json:"slackChannel,omitempty"`
	Receivers    []string `json:"receivers,omitempty"`
	// Reason says which route or annotation decided.
	Reason string `json:"reason"`
}

// Allows reports whether the named destination gets the incident's notifications.
func (r *Routing) Allows(receiver string) bool {
	if r == nil || len(r.Receivers) == 0 {
		return true
	}
	for _, n := range r.Receivers {
		if n == receiver {
			return true
		}
	}
	return false
}

// Route decides where the notifications of a finding go: the object's Slack channel annotation, else the first
// matching route, else nil (every destination, the default channel).
func (p *Policy) Route(f syncmedic.Finding) *Routing {
	var out *Routing
	for i, r := range p.Routes {
		if r.Match.matches(f) {
			name := r.Name
			if name == "" {
				name = fmt.Sprint(i + 1)
			}
			out = &Routing{SlackChannel: r.SlackChannel, Receivers: append([]string(nil), r.Receivers...), Reason: "route " + name}
			break
		}
	}
	if ch := f.Object.SlackChannel; ch != "" {
		if out == nil {
			out = &Routing{}
		}
		out.SlackChannel = ch
		out.Reason = fmt.Sprintf("annotation %s on %s", syncmedic.SlackChannelAnnotation, routingOwner(f.Object))
	}
	return out
}

// routingOwner names the Application or HelmRelease whose labels and annotation route the finding.
func routingOwner(o syncmedic.ObjectRef) string {
	if o.App != "" {
		return "Application " + joinNS(o.AppNamespace, o.App)
	}
	return o.Kind + " " + joinNS(o.Namespace, o.Name)
}

func joinNS(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (m RouteMatch) matches(f syncmedic.Finding) bool {
	o := f.Object
	releaseNS, release, _ := o.HelmRelease()
	switch {
	case !InScope(m.Rules, string(f.Rule)):
		return false
	case !InScope(m.Severities, f.Severity.String()):
		return false
	case len(m.Namespaces) > 0 && !InScope(m.Namespaces, o.Namespace) && !InScope(m.Namespaces, o.AppNamespace):
		return false
	case !InScope(m.Projects, o.Project):
		return false
	case !InScope(m.Apps, o.App):
		return false
	case len(m.Releases) > 0 && (release == "" || (!InScope(m.Releases, release) && !InScope(m.Releases, joinNS(releaseNS, release)))):
		return false
	}
	for k, pat := range m.Labels {
		v, ok := o.Labels[k]
		if !ok {
			return false
		}
		if matched, _ := path.Match(pat, v); !matched {
			return false
		}
	}
	return true
}

// validateRoutes checks every route, naming the field and the fix.
func validateRoutes(routes []Route) []error {
	var errs []error
	for i, r := range routes {
		field := fmt.Sprintf("routes[%d]", i)
		if r.SlackChannel == "" && len(r.Receivers) == 0 {
			errs = append(errs, fmt.Errorf("%s: sets neither slackChannel nor receivers, so it changes nothing", field))
		}
		for _, n := range r.Receivers {
			if i := sort.SearchStrings(knownReceivers, n); i == len(knownReceivers) || knownReceivers[i] != n {
				errs = append(errs, fmt.Errorf("%s.receivers: unknown receiver %q, want one of %s", field, n, strings.Join(knownReceivers, ", ")))
			}
		}
		m := r.Match
		lists := []struct {
			name string
			pats []string
		}{{"rules", m.Rules}, {"severities", m.Severities}, {"namespaces", m.Namespaces}, {"projects", m.Projects},
			{"apps", m.Apps}, {"releases", m.Releases}}
		for _, l := range lists {
			for _, p := range l.pats {
				if _, err := path.Match(p, ""); err != nil || p == "" {
					errs = append(errs, fmt.Errorf("%s.match.%s: %q is not a glob pattern (path.Match syntax: *, ?, [a-z])", field, l.name, p))
				}
			}
		}
		for _, s := range m.Severities {
			if s != "critical" && s != "warning" && s != "info" && !strings.ContainsAny(s, "*?[") {
				errs = append(errs, fmt.Errorf("%s.match.severities: unknown severity %q, want critical, warning or info", field, s))
			}
		}
		for k, p := range m.Labels {
			if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s.match.labels.%s: %q is not a glob pattern", field, k, p))
			}
		}
	}
	return errs
}
