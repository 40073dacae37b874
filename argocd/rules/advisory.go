package rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/syncmedic/syncmedic"
)

// Version is a parsed Argo CD server version (the Version API's "v2.14.3+abc1234").
type Version struct{ Major, Minor, Patch int }

// Less reports whether v is an earlier release than o.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

func (v Version) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ParseVersion reads "v2.14.3", "2.14.3+abc", "v3.1.0-rc2"; ok is false for anything else.
func ParseVersion(s string) (Version, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "+-"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, true
}

// hookFinalizerFixes are the 3.x releases that fixed hook finalizer leaks, per minor line (DESIGN.md, verified
// history): v3.0.16 (gitops-engine #761), v3.1.4 (#762), v3.2.0 (#770); the full fix is v3.4.0 (argo-cd #25916).
var hookFinalizerFixes = map[int]Version{0: {3, 0, 16}, 1: {3, 1, 4}, 2: {3, 2, 0}, 3: {3, 4, 0}}

// Advisories returns the version notes for a finding of rule on an Argo CD server of the given version ("" or an
// unparsable version gives none).
func Advisories(serverVersion string, rule syncmedic.RuleID) []string {
	v, ok := ParseVersion(serverVersion)
	if !ok {
		return nil
	}
	hookRule := rule == syncmedic.RuleHookFinalizerStuck || rule == syncmedic.RuleHookImmutable
	raceRule := rule == syncmedic.RuleHookCompletionMissed
	switch {
	case v.Major == 2 && v == (Version{2, 14, 3}) && hookRule:
		return []string{"Argo CD v2.14.3 adds argocd.argoproj.io/hook-finalizer to hooks by accident (argo-cd #21901, regression #22142); v2.14.4 reverted it (#22163). Upgrade to v2.14.4 or later, then remove the finalizers v2.14.3 left: no 2.x release removes them."}
	case v.Major == 2 && hookRule:
		return []string{fmt.Sprintf("Argo CD %s never adds or removes argocd.argoproj.io/hook-finalizer: this one was left by v2.14.3 (argo-cd #21901) and stays until removed.", v)}
	case v.Major == 2 && raceRule:
		return []string{fmt.Sprintf("Argo CD %s has no fix for hooks that finish before Argo CD observes them (argo-cd #21055, #6880); v3.x tracks hooks with a finalizer instead.", v)}
	case v.Major == 3 && (hookRule || raceRule):
		full := Version{3, 4, 0}
		if !v.Less(full) {
			return []string{fmt.Sprintf("Argo CD %s includes the full hook-finalizer fix (v3.4.0, argo-cd #25916); reports still open upstream: argo-cd #24187, #26180, #29464.", v)}
		}
		fix, ok := hookFinalizerFixes[v.Minor]
		if ok && v.Less(fix) {
			return []string{fmt.Sprintf("Argo CD %s leaks argocd.argoproj.io/hook-finalizer on some paths; fixed in %s and fully in v3.4.0 (argo-cd #25916). Upgrade.", v, fix)}
		}
		return []string{fmt.Sprintf("Argo CD %s has the leak fix of its release line, not the full hook-finalizer fix of v3.4.0 (argo-cd #25916); still open: argo-cd #24187, #26180, #29464.", v)}
	}
	return nil
}
