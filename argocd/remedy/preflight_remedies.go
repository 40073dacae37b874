package remedy

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/policy"
)

// remedyActions are the RBAC actions the remedy of each rule may take through the Argo CD API: PatchResource needs
// update (update/* on v3), Sync and TerminateOperation need sync. The Workflow remedy goes through Argo CD only for
// Workflows an application manages.
var remedyActions = map[syncmedic.RuleID][]string{
	syncmedic.RuleHookFinalizerStuck:       {argocd.ActionUpdate, argocd.ActionSync},
	syncmedic.RuleHookImmutable:            {argocd.ActionUpdate, argocd.ActionSync},
	syncmedic.RuleHookCompletionMissed:     {argocd.ActionSync},
	syncmedic.RuleOperationStuck:           {argocd.ActionSync},
	syncmedic.RuleArtifactGCFinalizerStuck: {argocd.ActionUpdate},
}

// RemedyPermissions returns the permissions the remedies the policy applies automatically need, sorted: for each
// rule above in auto mode, its actions on "<project>/*" for each project the policy lets it act in, or on scope
// (see WatchScope) when the policy names no project. On a server that needs the fine-grained form (Argo CD v3, or
// an empty or unparsable version), update comes with update/*. A policy with the kill switch on needs nothing.
func RemedyPermissions(p *policy.Policy, scope []string, serverVersion string) []argocd.Permission {
	if p == nil || p.KillSwitch {
		return nil
	}
	fineGrained := needsFineGrainedUpdate(serverVersion)
	set := map[argocd.Permission]bool{}
	for rule, actions := range remedyActions {
		r := p.For(rule)
		if r.Mode != policy.ModeAuto {
			continue
		}
		objects := scope
		if len(r.Projects) > 0 {
			objects = nil
			for _, proj := range r.Projects {
				objects = append(objects, proj+"/*")
			}
		}
		for _, obj := range objects {
			for _, a := range actions {
				set[argocd.Permission{Action: a, Object: obj}] = true
				if a == argocd.ActionUpdate && fineGrained {
					set[argocd.Permission{Action: argocd.ActionUpdateAny, Object: obj}] = true
				}
			}
		}
	}
	out := make([]argocd.Permission, 0, len(set))
	for perm := range set {
		out = append(out, perm)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Object != out[j].Object {
			return out[i].Object < out[j].Object
		}
		return out[i].Action < out[j].Action
	})
	return out
}

// needsFineGrainedUpdate reports whether PatchResource on this server needs update/<group>/<kind>/<ns>/<name>
// rather than plain update: from v3.0.0 by default. An unknown version counts as needing it, to be safe.
func needsFineGrainedUpdate(serverVersion string) bool {
	v, ok := rules.ParseVersion(serverVersion)
	return !ok || v.Major >= 3
}

// RemedyCheck is the answer of CheckRemedies.
type RemedyCheck struct {
	// Missing are the permissions CanI answered "no" for: those remedies will be refused.
	Missing []argocd.Permission
	// Unverified are the permissions the server cannot answer CanI for (its CanI knows only the plain actions, so
	// the fine-grained update/* cannot be asked): they may or may not be granted.
	Unverified []argocd.Permission
}

// OK reports whether every permission was granted.
func (c RemedyCheck) OK() bool { return len(c.Missing) == 0 && len(c.Unverified) == 0 }

// Warning is the log message for a check that is not OK: what is missing, what could not be checked, and the
// argocd-rbac-cm lines to add.
func (c RemedyCheck) Warning() string {
	var b strings.Builder
	if len(c.Missing) > 0 {
		fmt.Fprintf(&b, "the Argo CD account lacks %s, which the remedies the policy sets to auto need: they will be refused. "+
			"Add to argocd-rbac-cm: %s", joinPerms(c.Missing, argocd.Permission.String), joinPerms(c.Missing, argocd.Permission.PolicyLine))
	}
	if len(c.Unverified) > 0 {
		if b.Len() > 0 {
			b.WriteString(". ")
		}
		fmt.Fprintf(&b, "Argo CD's CanI cannot check %s (on Argo CD v3 plain update no longer covers PatchResource); "+
			"unless argocd-rbac-cm grants it, finalizer remedies will be refused: %s",
			joinPerms(c.Unverified, argocd.Permission.String), joinPerms(c.Unverified, argocd.Permission.PolicyLine))
	}
	return b.String()
}

func joinPerms(ps []argocd.Permission, f func(argocd.Permission) string) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = "`" + f(p) + "`"
	}
	return strings.Join(s, ", ")
}

// CheckRemedies asks CanI for each permission. A server that rejects the question as an invalid argument (its CanI
// knows only plain actions, as v2.14 and v3 do for update/*) leaves the permission unverified; any other failure
// is returned.
func CheckRemedies(ctx context.Context, c argocd.AccountClient, perms []argocd.Permission) (RemedyCheck, error) {
	var res RemedyCheck
	for _, p := range perms {
		ok, err := argocd.CanI(ctx, c, p)
		switch {
		case status.Code(err) == codes.InvalidArgument:
			res.Unverified = append(res.Unverified, p)
		case err != nil:
			return res, argocd.Classify(argocd.CallCanI, "(can-i "+p.String()+")", err)
		case !ok:
			res.Missing = append(res.Missing, p)
		}
	}
	return res, nil
}

// WarnRemedies checks the permissions the policy's automatic remedies need (see RemedyPermissions) and logs one
// warning naming what is missing; it logs nothing when every permission is granted or nothing is automatic. It
// reads the server version itself and never fails: the remedies' own refusals stay the authority.
func WarnRemedies(ctx context.Context, c argocd.Client, access argocd.AccountClient, p *policy.Policy, scope []string, log *slog.Logger) RemedyCheck {
	access = argocd.AccessOf(access, c)
	if access == nil || p == nil || p.KillSwitch {
		return RemedyCheck{}
	}
	serverVersion := ""
	if v, err := c.Version(ctx, &emptypb.Empty{}); err == nil {
		serverVersion = v.GetVersion()
	}
	perms := RemedyPermissions(p, scope, serverVersion)
	if len(perms) == 0 {
		return RemedyCheck{}
	}
	res, err := CheckRemedies(ctx, access, perms)
	if err != nil {
		log.Warn("argocd remedy permissions not checked", "error", err)
		return res
	}
	if !res.OK() {
		log.Warn("argocd account cannot apply every automatic remedy: "+res.Warning(), "missing", len(res.Missing), "unverified", len(res.Unverified))
	}
	return res
}
