package policy

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/syncmedic/syncmedic"
)

// MaySilence reports whether the policy's silenceBy lets c create and expire silences, and the entry that allowed
// it. Empty silenceBy (the default): nobody.
func (p *Policy) MaySilence(c Caller) (string, bool) {
	return MayFix(p.SilenceBy, c)
}

// MaySilenceAll reports whether the policy's silenceAllBy lets c create silences about no one application or object
// (silence.Silence.Targeted is false), and the entry that allowed it; c needs silenceBy as well. Empty silenceAllBy
// (the default): nobody.
func (p *Policy) MaySilenceAll(c Caller) (string, bool) {
	return MayFix(p.SilenceAllBy, c)
}

// MayAcknowledge reports whether c may acknowledge (take) an incident of rule, and the entry that allowed it. With
// ackBy set, its entries decide; without it (the default), whoever may fix the rule on demand (its fixBy) or create
// silences (silenceBy) may acknowledge — the responders, as in PagerDuty, where observers may not. An empty ackBy
// list lets nobody.
func (p *Policy) MayAcknowledge(rule syncmedic.RuleID, c Caller) (string, bool) {
	if p.AckBy != nil {
		return MayFix(p.AckBy, c)
	}
	if e, ok := MayFix(p.For(rule).FixBy, c); ok {
		return e, true
	}
	return MayFix(p.SilenceBy, c)
}

// validateWho checks a top-level list of fixBy-style entries (silenceBy, ackBy), naming it in the errors.
func validateWho(name string, patterns []string) []error {
	var errs []error
	for _, err := range validateFixBy("", patterns) {
		errs = append(errs, errors.New(strings.Replace(err.Error(), ".fixBy[", name+"[", 1)))
	}
	return errs
}

// Warnings lists what in a valid policy lets people act who may not be who they say, or entries that can never
// match, one sentence each naming the field and the fix; serve logs them when it loads the policy.
func (p *Policy) Warnings() []string {
	var out []string
	if p.TrustProxyGroups {
		out = append(out, "trustProxyGroups is on: group: entries match the Argocd-User-Groups header argocd-server forwards, "+
			"which a browser can set itself whenever its user's token has no groups claim (local users, SSO without groups, "+
			"anonymous access with users.anonymous.enabled in argocd-cm): keep anonymous access off and give every user a "+
			"groups claim, or turn trustProxyGroups off and use user: entries")
		return out
	}
	if e, ok := p.firstGroupEntry(); ok {
		out = append(out, e+" matches nobody: group: entries match Argo CD groups only with trustProxyGroups: true "+
			"(read its caveat in docs/serve.md, \"Policy\"), use user: entries otherwise")
	}
	return out
}

// firstGroupEntry names the first "group:" entry of fixBy (defaults and rules), silenceBy and ackBy.
func (p *Policy) firstGroupEntry() (string, bool) {
	lists := map[string][]string{"defaults.fixBy": p.Defaults.FixBy, "silenceBy": p.SilenceBy, "ackBy": p.AckBy}
	for id, r := range p.Rules {
		lists["rules."+string(id)+".fixBy"] = r.FixBy
	}
	names := make([]string, 0, len(lists))
	for name := range lists {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, e := range lists[name] {
			if strings.HasPrefix(e, "group:") {
				return name + " entry " + strconv.Quote(e), true
			}
		}
	}
	return "", false
}
