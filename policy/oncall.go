package policy

import (
	"errors"
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
