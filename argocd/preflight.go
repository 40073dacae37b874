package argocd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	"google.golang.org/grpc"

	"github.com/syncmedic/syncmedic"
)

// CallCanI is AccountService.CanI, the preflight question (any logged-in account may ask it).
const CallCanI Call = "CanI"

// AccountClient is the part of Argo CD's AccountService syncmedic calls: CanI, what `argocd account can-i` asks.
// The generated account.AccountServiceClient satisfies it.
type AccountClient interface {
	CanI(ctx context.Context, in *accountpkg.CanIRequest, opts ...grpc.CallOption) (*accountpkg.CanIResponse, error)
}

var _ AccountClient = accountpkg.AccountServiceClient(nil)

// AccessOf returns explicit when set, else c's CanI when c has one (an APIClient does; test doubles may not).
func AccessOf(explicit AccountClient, c any) AccountClient {
	if explicit != nil {
		return explicit
	}
	a, _ := c.(AccountClient)
	return a
}

// PolicyRole is the Argo CD RBAC role the suggested policy lines grant: the one manifests/argocd-cmp defines
// (`g, syncmedic, role:syncmedic` binds the syncmedic account to it).
const PolicyRole = "role:syncmedic"

// The RBAC actions on applications syncmedic needs, as CanI and argocd-rbac-cm spell them.
const (
	ActionGet    = "get"
	ActionSync   = "sync"
	ActionUpdate = "update"
	// ActionUpdateAny is the fine-grained form of update that covers every resource of an application: Argo CD v3
	// (and v2 with server.rbac.disableApplicationFineGrainedRBACInheritance) no longer lets plain update cover
	// PatchResource.
	ActionUpdateAny = "update/*"
)

// The Argo CD RBAC resources syncmedic asks CanI about.
const (
	ResourceApplications    = "applications"
	ResourceApplicationSets = "applicationsets"
)

// Permission is one Argo CD RBAC permission: an action on an object "<project>/<name>" or
// "<project>/<namespace>/<name>", globs allowed, of Resource (applications when empty).
type Permission struct{ Resource, Action, Object string }

func (p Permission) resource() string {
	if p.Resource == "" {
		return ResourceApplications
	}
	return p.Resource
}

func (p Permission) String() string { return p.resource() + ", " + p.Action + ", " + p.Object }

// PolicyLine is the argocd-rbac-cm policy line that grants p to PolicyRole.
func (p Permission) PolicyLine() string {
	return fmt.Sprintf("p, %s, %s, %s, %s, allow", PolicyRole, p.resource(), p.Action, p.Object)
}

// WatchScope returns the RBAC objects a watch of these projects needs `get` on: "<project>/*" per project, "*/*"
// without projects; with an app namespace, "<project>/<namespace>/*" (which a policy on "<project>/*" covers too).
func WatchScope(projects []string, appNamespace string) []string {
	if len(projects) == 0 {
		projects = []string{"*"}
	}
	out := make([]string, 0, len(projects))
	for _, p := range projects {
		if appNamespace != "" {
			out = append(out, p+"/"+appNamespace+"/*")
		} else {
			out = append(out, p+"/*")
		}
	}
	return out
}

// CanI asks argocd-server whether the token's account may take the action on the resource's objects matching object.
func CanI(ctx context.Context, c AccountClient, p Permission) (bool, error) {
	res, err := c.CanI(ctx, &accountpkg.CanIRequest{Resource: p.resource(), Action: p.Action, Subresource: p.Object})
	if err != nil {
		return false, err
	}
	return res.GetValue() == "yes", nil
}

// AccessError says which Argo CD RBAC permissions the account lacks and what to add to argocd-rbac-cm. It is the
// refusal of a watch or a scan whose account may not get the applications (syncmedic.Permanent wraps it).
type AccessError struct {
	// Missing are the permissions CanI answered "no" for.
	Missing []Permission
}

func (e *AccessError) Error() string {
	perms := make([]string, len(e.Missing))
	lines := make([]string, len(e.Missing))
	for i, p := range e.Missing {
		perms[i], lines[i] = "`"+p.String()+"`", "`"+p.PolicyLine()+"`"
	}
	return fmt.Sprintf("the Argo CD account lacks the RBAC permission %s: argocd-server silently leaves the applications "+
		"an account may not get out of Watch and List, so syncmedic would see none of them and report nothing stuck. "+
		"Add to argocd-rbac-cm (policy.csv, or a key of its own such as policy.syncmedic.csv) %s, with "+
		"`g, <account>, %s` for the account of the token; or limit syncmedic with --argocd-project to the projects "+
		"the account may read", strings.Join(perms, " and "), strings.Join(lines, " and "), PolicyRole)
}

// CheckWatch asks CanI for `applications, get` on each object of scope (see WatchScope). When any answer is "no",
// it returns a syncmedic.Permanent *AccessError naming the missing permissions and the policy lines to add; a CanI
// call that fails returns that error (classified: a bad token is Permanent, an unreachable server is not).
func CheckWatch(ctx context.Context, c AccountClient, scope []string) error {
	missing, err := missingGets(ctx, c, "", scope) // "": applications, as every Permission on them is spelled
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return syncmedic.Permanent(&AccessError{Missing: missing})
	}
	return nil
}

// IsAccessDenied reports whether err is (or wraps) an *AccessError.
func IsAccessDenied(err error) bool {
	var a *AccessError
	return errors.As(err, &a)
}

// CheckAppSets asks CanI for `applicationsets, get` on each object of scope (see WatchScope): argocd-server's
// ApplicationSet List silently leaves out the ones the account may not get, as its application List does. missing
// are the permissions answered "no"; an error is a CanI that could not be asked (classified).
func CheckAppSets(ctx context.Context, c AccountClient, scope []string) (missing []Permission, err error) {
	return missingGets(ctx, c, ResourceApplicationSets, scope)
}

// missingGets asks CanI for `<resource>, get` on each object of scope and returns the permissions answered "no";
// an error is a CanI that could not be asked (classified).
func missingGets(ctx context.Context, c AccountClient, resource string, scope []string) (missing []Permission, err error) {
	for _, obj := range scope {
		p := Permission{Resource: resource, Action: ActionGet, Object: obj}
		ok, err := CanI(ctx, c, p)
		if err != nil {
			return nil, Classify(CallCanI, "(can-i "+p.String()+")", err)
		}
		if !ok {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// policyLines joins ps' policy lines for a log or a problem: "`p, …`; `p, …`".
func policyLines(ps []Permission) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = "`" + p.PolicyLine() + "`"
	}
	return strings.Join(lines, "; ")
}
