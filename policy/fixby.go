package policy

import (
	"fmt"
	"path"
	"strings"
)

// Caller is the person who asks for a fix on demand (the incident page, the Argo CD extension, the API, Slack).
type Caller struct {
	// User is the Argo CD user name the proxy extension forwarded (Argocd-Username); empty for a direct API caller.
	User string
	// Groups are the Argo CD user's groups (Argocd-User-Groups), set only when the policy trusts them
	// (trustProxyGroups).
	Groups []string
	// Token is the name of the API token a direct caller sent ("alice" of the line "alice:<token>" in the token
	// file); empty for a bare token and for every other way in.
	Token string
	// SlackUser is the Slack user ID (U… or W…) of a click in Slack, as Slack signed or sent it; SlackName the
	// user's name in the workspace, SlackTeam the workspace ID, and SlackGroups the IDs (S…) of the user groups the
	// user is in, when they are known. A Slack caller has no Argo CD User.
	SlackUser, SlackName, SlackTeam string
	SlackGroups                     []string
	// Via says how the request came: ViaArgoCDExtension, ViaAPIToken or "slack".
	Via string
}

// The ways into the incident API a Caller's Via names.
const (
	// ViaAPIToken is a direct caller holding an API token.
	ViaAPIToken = "api-token"
	// ViaArgoCDExtension is a request argocd-server's proxy extension forwarded with the proxy token.
	ViaArgoCDExtension = "argocd-extension"
)

// String names the caller for the audit trail: "argocd user alice (groups sre, ops) via argocd-extension", "slack
// user alice (U024BE7LH) via slack", "token:alice via api-token".
func (c Caller) String() string {
	who := "the API token holder"
	switch {
	case c.Token != "":
		who = FixByToken + ":" + c.Token
	case c.SlackUser != "":
		who = "slack user " + c.SlackUser
		if c.SlackName != "" {
			who = "slack user " + c.SlackName + " (" + c.SlackUser + ")"
		}
	case c.User != "":
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

// FixByToken is the fixBy entry that lets direct callers of the incident API (an API token, no Argo CD identity)
// fix on demand; "token:<name>" lets only the holder of the token named so in the token file.
const FixByToken = "token"

// The fixBy kinds of Slack: "slack:<user ID>" and "slack-group:<user group ID>" match a click in Slack.
const (
	FixBySlackUser  = "slack"
	FixBySlackGroup = "slack-group"
)

// isSlackID reports whether s has the form of a Slack user ID (U…, W…) or user group ID (S…): an upper-case letter,
// then upper-case letters and digits.
func isSlackID(s string) bool {
	if len(s) < 3 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// SlackMayFix reports whether patterns (fixBy, or ackBy and silenceBy, which take the same entries) could let
// someone act from Slack: only "slack:" and "slack-group:" entries do ("*" does not: everyone in a channel is more
// people than everyone who holds the API token).
func SlackMayFix(patterns []string) bool {
	for _, p := range patterns {
		if kind, _, _ := strings.Cut(p, ":"); kind == FixBySlackUser || kind == FixBySlackGroup {
			return true
		}
	}
	return false
}

// MayFix reports whether patterns (RulePolicy.FixBy) let c fix, and the entry that allowed it.
func MayFix(patterns []string, c Caller) (string, bool) {
	for _, p := range patterns {
		kind, pat, _ := strings.Cut(p, ":")
		switch {
		case p == "*" && c.SlackUser == "":
			return p, true
		case p == FixByToken && c.Via == ViaAPIToken:
			return p, true
		case kind == FixByToken && c.Via == ViaAPIToken && c.Token != "" && pat == c.Token:
			return p, true
		case kind == "user" && c.User != "" && globMatch(pat, c.User):
			return p, true
		case kind == "group" && c.User != "":
			for _, g := range c.Groups {
				if globMatch(pat, g) {
					return p, true
				}
			}
		case kind == FixBySlackUser && c.SlackUser != "" && pat == c.SlackUser:
			return p, true
		case kind == FixBySlackGroup && c.SlackUser != "":
			for _, g := range c.SlackGroups {
				if g == pat {
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
		case ok && kind == FixByToken:
			if !IsTokenName(pat) {
				errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q is not a token name: give the name before the colon of a line \"<name>:<token>\" of the API token file (letters, digits, '.', '_', '@', '-'; no globs)", field, i, p))
			}
		case ok && (kind == "user" || kind == "group") && pat != "":
			if _, err := path.Match(pat, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q is not a valid pattern: use a name or a glob such as \"group:sre-*\"", field, i, p))
			}
		case ok && (kind == FixBySlackUser || kind == FixBySlackGroup):
			if !isSlackID(pat) {
				errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q is not a Slack ID: give the member ID (\"slack:U024BE7LH\", in the user's profile: Copy member ID) or the user group ID (\"slack-group:S0614TZR7\"), not a name; no globs", field, i, p))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.fixBy[%d]: %q, want \"*\", %q, \"token:<name>\" (one named API token), \"user:<name>\" or \"group:<name>\" (Argo CD user or group, globs allowed), \"slack:<user ID>\" or \"slack-group:<user group ID>\"", field, i, p, FixByToken))
		}
	}
	return errs
}

// IsTokenName reports whether s may name an API token ("alice" in the token file line "alice:<token>", the fixBy
// entry "token:alice"): letters, digits, '.', '_', '@' and '-', at most 64.
func IsTokenName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("._@-", r) {
			return false
		}
	}
	return true
}
