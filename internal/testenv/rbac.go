package testenv

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Grant is one permission RBAC gives a subject: Verb on Group/Resource ("resource/subresource" for a subresource),
// in Namespace (empty: every namespace and the cluster-scoped objects, a ClusterRoleBinding's), on the object Name
// only when it is set (a rule's resourceNames). Source names the role and the binding that grant it.
type Grant struct {
	Namespace, Verb, Group, Resource, Name string
	Source                                 string
}

// String names the grant as a docs table would: verb group/resource "name" in namespace (by source).
func (g Grant) String() string {
	res := g.Resource
	if g.Group != "" {
		res = g.Group + "/" + res
	}
	if g.Name != "" {
		res += fmt.Sprintf(" %q", g.Name)
	}
	scope := "cluster-wide"
	if g.Namespace != "" {
		scope = "in " + g.Namespace
	}
	return fmt.Sprintf("%s %s %s (%s)", g.Verb, res, scope, g.Source)
}

// rule is the one-verb, one-resource, at most one-name PolicyRule of g.
func (g Grant) rule() rbacv1.PolicyRule {
	r := rbacv1.PolicyRule{Verbs: []string{g.Verb}, APIGroups: []string{g.Group}, Resources: []string{g.Resource}}
	if g.Name != "" {
		r.ResourceNames = []string{g.Name}
	}
	return r
}

// authenticatedRules are what Kubernetes' bootstrap roles give every authenticated user (system:discovery and
// system:basic-user, bound to system:authenticated): the discovery GETs and the self reviews. A client makes these
// without any role of its install.
var authenticatedRules = []rbacv1.PolicyRule{
	{Verbs: []string{"get"}, NonResourceURLs: []string{"/livez", "/readyz", "/healthz", "/version", "/version/",
		"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"}},
	{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
	{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
}

// ServiceAccountGrants returns what the Roles, ClusterRoles and bindings among objs (rendered manifests) grant the
// ServiceAccount namespace/name, one Grant per verb, resource and name (rbac validation.BreakdownRule): a
// RoleBinding's in its namespace, a ClusterRoleBinding's everywhere. A binding of that ServiceAccount whose role is not
// among objs, or a RoleBinding without a namespace, is an error naming it.
func ServiceAccountGrants(objs []*unstructured.Unstructured, namespace, name string) ([]Grant, error) {
	roles := map[string][]rbacv1.PolicyRule{} // "Kind namespace/name"
	var roleBindings []rbacv1.RoleBinding
	var clusterBindings []rbacv1.ClusterRoleBinding
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "Role":
			var r rbacv1.Role
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r)
			roles["Role "+r.Namespace+"/"+r.Name] = r.Rules
		case "ClusterRole":
			var r rbacv1.ClusterRole
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r)
			roles["ClusterRole /"+r.Name] = r.Rules
		case "RoleBinding":
			var b rbacv1.RoleBinding
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)
			roleBindings = append(roleBindings, b)
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)
			clusterBindings = append(clusterBindings, b)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	var grants []Grant
	add := func(scope, binding string, ref rbacv1.RoleRef) error {
		key := ref.Kind + " /" + ref.Name
		if ref.Kind == "Role" {
			key = "Role " + scope + "/" + ref.Name
		}
		rules, ok := roles[key]
		if !ok {
			return fmt.Errorf("%s refers to %s %s, which the manifests do not hold: render the role with its binding", binding, ref.Kind, ref.Name)
		}
		source := ref.Kind + " " + ref.Name + " by " + binding
		for _, rule := range rules {
			for _, r := range validation.BreakdownRule(rule) {
				if len(r.NonResourceURLs) > 0 {
					continue // a ClusterRole's URLs; none of the installs grants any
				}
				g := Grant{Namespace: scope, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0], Source: source}
				if len(r.ResourceNames) > 0 {
					g.Name = r.ResourceNames[0]
				}
				grants = append(grants, g)
			}
		}
		return nil
	}
	for _, b := range roleBindings {
		if !bindsServiceAccount(b.Subjects, namespace, name) {
			continue
		}
		if b.Namespace == "" {
			return nil, fmt.Errorf("RoleBinding %s has no namespace: render the manifests with the install's namespace", b.Name)
		}
		if err := add(b.Namespace, "RoleBinding "+b.Namespace+"/"+b.Name, b.RoleRef); err != nil {
			return nil, err
		}
	}
	for _, b := range clusterBindings {
		if !bindsServiceAccount(b.Subjects, namespace, name) {
			continue
		}
		if err := add("", "ClusterRoleBinding "+b.Name, b.RoleRef); err != nil {
			return nil, err
		}
	}
	return grants, nil
}

// bindsServiceAccount reports whether subjects name the ServiceAccount namespace/name, or a group it is in.
func bindsServiceAccount(subjects []rbacv1.Subject, namespace, name string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			return s.Name == name && s.Namespace == namespace
		case rbacv1.GroupKind:
			return s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+namespace || s.Name == "system:authenticated"
		}
		return false
	})
}

// RBACUse is how calls and grants compare, both ways (CompareRBAC).
type RBACUse struct {
	// Ungranted are the calls the apiserver refused (403) or that no grant allows (nor Kubernetes' default grants
	// to every authenticated user, such as discovery), each once, sorted.
	Ungranted []AuditCall
	// Unused are the grants no call used, in the grants' order.
	Unused []Grant
}

// CompareRBAC compares what a subject did (its calls, from the audit log) with what it was granted: a call is
// allowed by a grant of the same verb and resource (a named grant only for a call naming that object), in the
// grant's namespace or by a cluster-wide grant, as the RBAC authorizer decides (rbac validation.Covers).
func CompareRBAC(calls []AuditCall, grants []Grant) RBACUse {
	var use RBACUse
	used := make([]bool, len(grants))
	seen := map[AuditCall]bool{}
	for _, c := range calls {
		if seen[c] {
			continue
		}
		seen[c] = true
		if c.NonResourceURL != "" {
			if ok, _ := validation.Covers(authenticatedRules, []rbacv1.PolicyRule{{Verbs: []string{c.Verb}, NonResourceURLs: []string{c.NonResourceURL}}}); !ok || c.Code == 403 {
				use.Ungranted = append(use.Ungranted, c)
			}
			continue
		}
		resource := c.Resource
		if c.Subresource != "" {
			resource += "/" + c.Subresource
		}
		name := c.Name
		if c.Verb == "create" {
			name = "" // the audit log names the object created; the authorizer sees no name (resourceNames cannot limit create)
		}
		want := Grant{Verb: c.Verb, Group: c.Group, Resource: resource, Name: name}.rule()
		allowed, _ := validation.Covers(authenticatedRules, []rbacv1.PolicyRule{want})
		for i, g := range grants {
			if g.Namespace != "" && g.Namespace != c.Namespace {
				continue
			}
			if ok, _ := validation.Covers([]rbacv1.PolicyRule{g.rule()}, []rbacv1.PolicyRule{want}); ok {
				used[i], allowed = true, true
			}
		}
		if !allowed || c.Code == 403 {
			use.Ungranted = append(use.Ungranted, c)
		}
	}
	for i, g := range grants {
		if !used[i] {
			use.Unused = append(use.Unused, g)
		}
	}
	sort.Slice(use.Ungranted, func(i, j int) bool { return use.Ungranted[i].String() < use.Ungranted[j].String() })
	return use
}

// Calls lists calls once each, sorted, one a line: for a failure's message.
func Calls(calls []AuditCall) string {
	set := map[string]bool{}
	for _, c := range calls {
		set[c.String()] = true
	}
	lines := make([]string, 0, len(set))
	for l := range set {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
