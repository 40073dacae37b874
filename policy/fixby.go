package policy

import (
	"fmt"
	"path"
	"strings"
)

// Caller is the person who asks for a fix on demand (the incident page, the Argo CD extension, the API).
type Caller struct {
	// User is the Argo CD user name the proxy extension forwarded (Argocd-Username); empty for a direct API caller.
	User string
	// Groups are the Argo CD user's groups (Argocd-User-Groups).
	Groups []string
	// Via says how the request came: "argocd-extension" or "api-token".
	Via string
}

// String names the caller for the audit trail: "argocd user alice (groups sre, ops) via argocd-extension".
func (c Caller) String() string {
	who := "the API token holder"
	if c.User != "" {
		who = "argocd user " + c.User
		if len(c.Groups) > 0 {
			who += " (groups " + strings.Join(c.Groups, ", ") + ")"
		}
	}
	if c.Via != "" {
		who += " via " + c.Via
	}
	return who
}

// FixByToken is the fixBy entry that lets direct callers of the incident API (the bearer token, no Argo CD identity)
// fix on demand.
const FixByToken = "token"

// MayFix reports whether patterns (RulePolicy.FixBy) let c fix, and the entry that allowed it.
func MayFix(patterns []string, c Caller) (string, bool) {
	for _, p := range patterns {
		kind, pat, _ := strings.Cut(p, ":")
		switch {
		case p == "*":
			return p, true
		case p == FixByToken && c.User == "":
			return p, true
		case kind == "user" && c.User != "" && globMatch(pat, c.User):
			return p, true
		case kind == "group" && c.User != "":
			for _, g := range c.Groups {
				if globMatch(pat, g) {
					return p, true
				}
			}
		}
	}
	return "", false
}

func globMatch(pattern, s string) bool {
	ok, _ := path.Match(pattern, s)
	return ok
}

// validateFixBy checks the entries of RulePolicy.FixBy.
func validateFixBy(field string, patterns []string) []error {
	var errs []error
	for i, p := range patterns {
		kind, pat, ok := strings.Cut(p, ":")
		switch {
		case p == "*" || p == FixByToken:
		case ok && (kind == "user" || kind == "group") && pat != "":
			if _, err := path.Match(pat, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q is not a valid pattern: use a name or a glob such as \"group:sre-*\"", field, i, p))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q, want \"*\", %q, \"user:<name>\" or \"group:<name>\" (Argo CD user or group, globs allowed)", field, i, p, FixByToken))
		}
	}
	return errs
}
