package ui

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// Filter selects incidents. Empty fields match everything.
type Filter struct {
	// App is an Argo CD Application, "name" or "namespace/name".
	App string
	// Project is an Argo CD project.
	Project string
	// Namespace is the namespace of the object the incident is about.
	Namespace string
	// Release is a Flux HelmRelease, "name" or "namespace/name": the HelmRelease itself or an object it applied.
	Release string
	// Rule is a rule ID, such as argocd/hook-finalizer-stuck.
	Rule string
	// State is "open" (the default), "resolved" or "all".
	State string
	// Watch streams the list as server-sent events, again after every change (watch=true).
	Watch bool
}

// filterParams are the query parameters of GET /api/v1/incidents.
var filterParams = []string{"app", "project", "namespace", "release", "rule", "state", "watch"}

// parseFilter reads a Filter from query parameters, rejecting unknown parameters and states so that a typo does
// not silently widen the answer.
func parseFilter(q url.Values) (Filter, error) {
	for k := range q {
		if !contains(filterParams, k) {
			return Filter{}, fmt.Errorf("unknown query parameter %q: want one of %s", k, strings.Join(filterParams, ", "))
		}
		if len(q[k]) > 1 {
			return Filter{}, fmt.Errorf("query parameter %q given %d times: give it once", k, len(q[k]))
		}
	}
	f := Filter{App: q.Get("app"), Project: q.Get("project"), Namespace: q.Get("namespace"), Release: q.Get("release"),
		Rule: q.Get("rule"), State: q.Get("state")}
	switch q.Get("watch") {
	case "", "false", "0":
	case "true", "1":
		f.Watch = true
	default:
		return Filter{}, fmt.Errorf("watch %q: want true or false", q.Get("watch"))
	}
	switch f.State {
	case "":
		f.State = "open"
	case "open", "resolved", "all":
	default:
		return Filter{}, fmt.Errorf("state %q: want open, resolved or all", f.State)
	}
	return f, nil
}

// Match reports whether inc passes the filter.
func (f Filter) Match(inc *incident.Incident) bool {
	o := inc.Finding.Object
	switch {
	case f.State == "open" && !inc.IsOpen(), f.State == "resolved" && inc.IsOpen():
		return false
	case f.App != "" && !appMatch(f.App, inc.Finding):
		return false
	case f.Project != "" && o.Project != f.Project:
		return false
	case f.Namespace != "" && o.Namespace != f.Namespace:
		return false
	case f.Rule != "" && string(inc.Finding.Rule) != f.Rule:
		return false
	case f.Release != "" && !releaseMatch(f.Release, o):
		return false
	}
	return true
}

// appMatch matches the Application that manages the finding's object, or one the finding is also about (the
// Applications holding an ApplicationSet's rollout step).
func appMatch(want string, f syncmedic.Finding) bool {
	if qualifiedMatch(want, f.Object.AppNamespace, f.Object.App) {
		return true
	}
	for _, r := range f.Related {
		if r.Kind == "Application" && qualifiedMatch(want, r.AppNamespace, r.App) {
			return true
		}
	}
	return false
}

// qualifiedMatch matches "name" against name, and "namespace/name" against both.
func qualifiedMatch(want, namespace, name string) bool {
	if name == "" {
		return false
	}
	if ns, n, ok := strings.Cut(want, "/"); ok {
		return ns == namespace && n == name
	}
	return want == name
}

// releaseMatch matches a HelmRelease, or an object whose Flux owner is that HelmRelease.
func releaseMatch(want string, o syncmedic.ObjectRef) bool {
	ns, name, ok := o.HelmRelease()
	return ok && qualifiedMatch(want, ns, name)
}

// scope is what a caller may see: everything, or (through the Argo CD proxy extension) one Application.
type scope struct {
	// app and appNamespace name the Application of an Argo CD proxy request; empty for a direct caller.
	app, appNamespace, project string
}

// allows reports whether the scope may see inc: a direct caller every incident, an Argo CD proxy request those about
// its Application, about an object the Application manages, or naming the Application among the objects the finding
// is also about (Finding.Related: an ApplicationSet's rollout held by this Application).
func (s scope) allows(inc *incident.Incident) bool {
	if s.app == "" {
		return true
	}
	if s.owns(inc.Finding.Object) {
		return true
	}
	for _, r := range inc.Finding.Related {
		if r.Kind == "Application" && s.owns(r) {
			return true
		}
	}
	return false
}

// owns reports whether o is the scope's Application or an object it manages. A finding about an object the app
// tracks (a cluster check reads the tracking label or annotation) knows the app's name only; an app namespace or
// project it does know must match.
func (s scope) owns(o syncmedic.ObjectRef) bool {
	return o.App == s.app && (o.AppNamespace == "" || o.AppNamespace == s.appNamespace) && (o.Project == "" || o.Project == s.project)
}

// selectIncidents returns the views of the incidents the scope allows and the filter matches, open first, then
// by opening time; decorate adds what the caller may do about each.
func selectIncidents(all []incident.Incident, s scope, f Filter, decorate func(*Incident, incident.Incident)) []Incident {
	out := []Incident{}
	for i := range all {
		if s.allows(&all[i]) && f.Match(&all[i]) {
			v := newIncident(all[i])
			decorate(&v, all[i])
			out = append(out, v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		oi, oj := out[i].State != string(incident.StateResolved), out[j].State != string(incident.StateResolved)
		if oi != oj {
			return oi
		}
		return out[i].OpenedAt.Before(out[j].OpenedAt)
	})
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
