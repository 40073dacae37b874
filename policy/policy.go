package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"sigs.k8s.io/yaml"
)

// Mode says what syncmedic does about a rule's findings.
type Mode string

// The modes of a rule.
const (
	// ModeOff ignores the rule: no incident, no notification, no action.
	ModeOff Mode = "off"
	// ModeNotify opens incidents and notifies; the remedy is only recorded as what would be done (dry-run).
	ModeNotify Mode = "notify"
	// ModeAuto also applies the remedy, when it is safe unattended, the object is in scope and the rate limit allows.
	ModeAuto Mode = "auto"
)

// UnmarshalJSON reads a mode; a bare YAML off (which YAML 1.1 reads as false) means ModeOff.
func (m *Mode) UnmarshalJSON(b []byte) error {
	if string(b) == "false" {
		*m = ModeOff
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode: want off, notify or auto, got %s", string(b))
	}
	if s == "false" { // sigs.k8s.io/yaml hands a bare off to a string field as "false"
		s = string(ModeOff)
	}
	*m = Mode(s)
	return nil
}

// PolicyConfigMapKey is the key of a policy ConfigMap's data that holds the policy YAML.
const PolicyConfigMapKey = "policy.yaml"

// Duration is a time.Duration written as "90s", "5m", "1h" in policy files.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"5m\" or \"1h30m\", got %s", string(b))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it like \"90s\", \"5m\" or \"1h30m\"", s)
	}
	*d = Duration(v)
	return nil
}

// RateLimit bounds the automatic actions on one object: at most Max in any Window, and after a failed action wait
// Backoff, doubling per consecutive failure up to MaxBackoff.
type RateLimit struct {
	Max        int      `json:"max"`
	Window     Duration `json:"window"`
	Backoff    Duration `json:"backoff"`
	MaxBackoff Duration `json:"maxBackoff"`
}

// RulePolicy is what the policy says about one rule (or, as Policy.Defaults, about every rule). Unset fields take
// the defaults' value.
type RulePolicy struct {
	Mode Mode `json:"mode,omitempty"`
	// Threshold overrides the catalog's age threshold for the rule.
	Threshold *Duration `json:"threshold,omitempty"`
	// Namespaces the rule may act in (glob patterns as in path.Match); empty: every namespace.
	Namespaces []string `json:"namespaces,omitempty"`
	// Projects are the Argo CD projects the rule may act in (glob patterns); empty: every project.
	Projects  []string   `json:"projects,omitempty"`
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// RerunHooks lets an automatic remedy start a new Argo CD sync, which runs every hook of the application again
	// (the default delete policy BeforeHookCreation deletes and recreates them). Off by default: without it such a
	// remedy is only proposed.
	RerunHooks *bool `json:"rerunHooks,omitempty"`
	// FixBy lists who may apply the rule's remedy on demand, from the incident page, the Argo CD extension or the
	// incident API (dry-run first, then confirm): "user:<name>" and "group:<name>" match the Argo CD user and groups
	// the proxy extension forwards (globs allowed), "token" direct callers with the API's bearer token, "*" anyone
	// who reaches the API, "slack:<user ID>" and "slack-group:<user group ID>" a click in Slack by that member or a
	// member of that user group (neither "*" nor "token" lets a Slack click fix). Empty (the default): nobody, the API is read-only. Such a fix still respects the mode
	// (not off), the kill switch, namespaces, projects and the rate limit; it may re-run hooks, and says so first.
	FixBy []string `json:"fixBy,omitempty"`
}

// Policy decides, per rule, whether syncmedic ignores, notifies or acts. Load it with LoadPolicy (it is validated
// on load); the zero value is not valid, use DefaultPolicy.
type Policy struct {
	// KillSwitch stops every automatic action at once (findings are still tracked and notified).
	KillSwitch bool `json:"killSwitch,omitempty"`
	// ResolveAfter is how many consecutive evaluations without the finding resolve its incident.
	ResolveAfter int                             `json:"resolveAfter,omitempty"`
	Defaults     RulePolicy                      `json:"defaults,omitempty"`
	Rules        map[syncmedic.RuleID]RulePolicy `json:"rules,omitempty"`
	// Routes send incidents to Slack channels and destinations by project, app, namespace, release, labels, rule and
	// severity (routing.go); the first that matches decides.
	Routes []Route `json:"routes,omitempty"`
	// SilenceBy lists who may create and expire silences (the incident page, the Argo CD extension, the API,
	// Slack), with fixBy's entries; empty (the default): nobody.
	SilenceBy []string `json:"silenceBy,omitempty"`
	// SilenceAllBy lists who may, besides silenceBy, create silences that are about no one application or object
	// (without an exact app or name matcher: a namespace, a rule, "app=~.*"), which can mute and stop the remedies
	// of every team's applications at once; fixBy's entries; empty (the default): nobody.
	SilenceAllBy []string `json:"silenceAllBy,omitempty"`
	// AckBy lists who may acknowledge (take) an incident, with fixBy's entries. Unset (the default): whoever may fix
	// the incident's rule on demand or create silences; an empty list: nobody.
	AckBy []string `json:"ackBy,omitempty"`
	// TrustProxyGroups lets "group:" entries (fixBy, silenceBy, ackBy) match the groups argocd-server's proxy
	// extension forwards (Argocd-User-Groups). Off by default: argocd-server sets that header only for users whose
	// token has a groups claim, so a local user's or an anonymous browser's own header reaches syncmedic unchanged
	// and can name any group. Turn it on only when every Argo CD user logs in through SSO with a groups claim and
	// users.anonymous.enabled is off in argocd-cm.
	TrustProxyGroups bool `json:"trustProxyGroups,omitempty"`
}

// DefaultPolicy notifies every rule and acts on none (every remedy is recorded as a dry-run).
func DefaultPolicy() *Policy {
	return &Policy{
		ResolveAfter: 3,
		Defaults: RulePolicy{Mode: ModeNotify, RateLimit: &RateLimit{
			Max: 3, Window: Duration(time.Hour), Backoff: Duration(time.Minute), MaxBackoff: Duration(time.Hour),
		}},
	}
}

// LoadPolicyFile reads and validates a policy YAML file.
func LoadPolicyFile(file string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := LoadPolicy(b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", file, err)
	}
	return p, nil
}

// LoadPolicy parses policy YAML over DefaultPolicy and validates it; errors name the field and the fix.
func LoadPolicy(b []byte) (*Policy, error) {
	p := DefaultPolicy()
	var in Policy
	if err := yaml.UnmarshalStrict(b, &in); err != nil {
		return nil, fmt.Errorf("%w (the fields are killSwitch, resolveAfter, defaults, rules, routes, silenceBy, silenceAllBy, ackBy and trustProxyGroups; see docs/serve.md, \"Policy\")", err)
	}
	p.KillSwitch = in.KillSwitch
	if in.ResolveAfter != 0 {
		p.ResolveAfter = in.ResolveAfter
	}
	p.Defaults = p.Defaults.merge(in.Defaults)
	p.Rules = in.Rules
	p.Routes = in.Routes
	p.SilenceBy, p.SilenceAllBy, p.AckBy, p.TrustProxyGroups = in.SilenceBy, in.SilenceAllBy, in.AckBy, in.TrustProxyGroups
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// merge returns r with the fields set in o replacing its own.
func (r RulePolicy) merge(o RulePolicy) RulePolicy {
	if o.Mode != "" {
		r.Mode = o.Mode
	}
	if o.Threshold != nil {
		r.Threshold = o.Threshold
	}
	if o.Namespaces != nil {
		r.Namespaces = o.Namespaces
	}
	if o.Projects != nil {
		r.Projects = o.Projects
	}
	if o.RerunHooks != nil {
		r.RerunHooks = o.RerunHooks
	}
	if o.FixBy != nil {
		r.FixBy = o.FixBy
	}
	if o.RateLimit != nil {
		rl := *r.RateLimit
		if o.RateLimit.Max != 0 {
			rl.Max = o.RateLimit.Max
		}
		if o.RateLimit.Window != 0 {
			rl.Window = o.RateLimit.Window
		}
		if o.RateLimit.Backoff != 0 {
			rl.Backoff = o.RateLimit.Backoff
		}
		if o.RateLimit.MaxBackoff != 0 {
			rl.MaxBackoff = o.RateLimit.MaxBackoff
		}
		r.RateLimit = &rl
	}
	return r
}

// Validate checks every field and returns all problems at once, each naming the field and the fix.
func (p *Policy) Validate() error {
	var errs []error
	if p.ResolveAfter < 1 {
		errs = append(errs, fmt.Errorf("resolveAfter: %d, want 1 or more evaluations", p.ResolveAfter))
	}
	errs = append(errs, p.Defaults.validate("defaults", "")...)
	errs = append(errs, validateRateLimit("defaults", p.Defaults.RateLimit)...)
	ids := make([]string, 0, len(p.Rules))
	for id := range p.Rules {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	for _, id := range ids {
		field := "rules." + id
		if _, err := syncmedic.ParseRuleID(id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		errs = append(errs, p.Rules[syncmedic.RuleID(id)].validate(field, syncmedic.RuleID(id))...)
		if p.Rules[syncmedic.RuleID(id)].RateLimit != nil {
			errs = append(errs, validateRateLimit(field, p.For(syncmedic.RuleID(id)).RateLimit)...)
		}
	}
	errs = append(errs, validateRoutes(p.Routes)...)
	errs = append(errs, validateWho("silenceBy", p.SilenceBy)...)
	errs = append(errs, validateWho("silenceAllBy", p.SilenceAllBy)...)
	errs = append(errs, validateWho("ackBy", p.AckBy)...)
	return errors.Join(errs...)
}

func (r RulePolicy) validate(field string, id syncmedic.RuleID) []error {
	var errs []error
	switch r.Mode {
	case "", ModeOff, ModeNotify:
	case ModeAuto:
		if rule, ok := syncmedic.LookupRule(id); ok && len(rule.Actions) == 0 {
			errs = append(errs, fmt.Errorf("%s.mode: auto, but %s has no automatic remedy: use notify", field, id))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.mode: %q, want off, notify or auto", field, r.Mode))
	}
	if r.Threshold != nil && *r.Threshold < 0 {
		errs = append(errs, fmt.Errorf("%s.threshold: %s is negative, want a duration such as \"5m\"", field, time.Duration(*r.Threshold)))
	}
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"namespaces", r.Namespaces}, {"projects", r.Projects}} {
		for i, pat := range list.patterns {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %q is not a valid pattern: use a name or a glob such as \"team-*\"", field, list.name, i, pat))
			}
		}
	}
	errs = append(errs, validateFixBy(field, r.FixBy)...)
	return errs
}

func validateRateLimit(field string, rl *RateLimit) []error {
	var errs []error
	if rl != nil {
		if rl.Max < 1 {
			errs = append(errs, fmt.Errorf("%s.rateLimit.max: %d, want at least 1 action per window", field, rl.Max))
		}
		if rl.Window <= 0 {
			errs = append(errs, fmt.Errorf("%s.rateLimit.window: want a positive duration such as \"1h\"", field))
		}
		if rl.Backoff <= 0 || rl.MaxBackoff < rl.Backoff {
			errs = append(errs, fmt.Errorf("%s.rateLimit.backoff/maxBackoff: want 0 < backoff <= maxBackoff, such as \"1m\" and \"1h\"", field))
		}
	}
	return errs
}

// For returns the effective policy of a rule: its own entry over the defaults.
func (p *Policy) For(id syncmedic.RuleID) RulePolicy {
	r := p.Defaults
	if o, ok := p.Rules[id]; ok {
		r = r.merge(o)
	}
	return r
}

// Threshold returns the policy's threshold for the rule, if it sets one.
func (p *Policy) Threshold(id syncmedic.RuleID) (time.Duration, bool) {
	r := p.For(id)
	if r.Threshold == nil {
		return 0, false
	}
	return time.Duration(*r.Threshold), true
}

// Decision is what the policy allows for one finding.
type Decision struct {
	Mode Mode
	// Act is true when syncmedic may apply the remedy for real (rate limits still apply).
	Act bool
	// Reason explains the decision in one sentence, for the incident and the audit trail.
	Reason string
}

// Decide says what syncmedic may do about f.
func (p *Policy) Decide(f syncmedic.Finding) Decision {
	r := p.For(f.Rule)
	d := Decision{Mode: r.Mode}
	switch {
	case r.Mode == ModeOff:
		d.Reason = fmt.Sprintf("policy: %s is off", f.Rule)
	case f.Remedy.Action == syncmedic.ActionNone:
		d.Reason = "no action syncmedic can apply to this finding: nothing will be applied; the manual steps are above"
	case p.KillSwitch:
		d.Reason = "the kill switch is on: syncmedic takes no action (dry-run)"
	case r.Mode != ModeAuto:
		d.Reason = fmt.Sprintf("policy: %s is notify only (dry-run); set it to auto to let syncmedic apply the fix", f.Rule)
	case !f.Remedy.AutoSafe:
		d.Reason = "this remedy is not safe to apply unattended: apply it by hand"
	case f.Remedy.RerunsHooks && (r.RerunHooks == nil || !*r.RerunHooks):
		d.Reason = fmt.Sprintf("this remedy starts a new sync, which runs every hook of the application again (migrations included): set rerunHooks: true for %s to let syncmedic do it, or apply it by hand", f.Rule)
	case !InScope(r.Namespaces, f.Object.Namespace):
		d.Reason = fmt.Sprintf("policy: namespace %q is not in the allowed namespaces (%s) for %s", f.Object.Namespace, strings.Join(r.Namespaces, ", "), f.Rule)
	case !InScope(r.Projects, f.Object.Project):
		d.Reason = fmt.Sprintf("policy: Argo CD project %q is not in the allowed projects (%s) for %s", f.Object.Project, strings.Join(r.Projects, ", "), f.Rule)
	default:
		d.Act = true
		d.Reason = fmt.Sprintf("policy: auto for %s", f.Rule)
	}
	return d
}

// InScope reports whether value matches one of patterns; an empty list allows everything, and an empty value
// (a cluster-scoped object, an object without a project) matches only an empty list.
func InScope(patterns []string, value string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, value); ok && value != "" {
			return true
		}
	}
	return false
}
