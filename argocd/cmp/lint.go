package cmp

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/synchook"
	resourceutil "github.com/syncmedic/syncmedic/internal/argoapi/syncresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HazardID names a lint hazard. The IDs are part of the public interface: they appear in stderr, in strict-mode
// errors and in the syncmedic.io/hazards annotation.
type HazardID string

// The hazards, each behind an incident of the failure catalog.
const (
	// HazardHookNoDeletePolicy: a hook Job with neither argocd.argoproj.io/hook-delete-policy nor
	// helm.sh/hook-delete-policy.
	HazardHookNoDeletePolicy HazardID = "hook-no-delete-policy"
	// HazardHookImmutable: a hook Job with a fixed name that outlives its run, so a later sync with a changed pod
	// template must delete it first — which argocd.argoproj.io/hook-finalizer can block ("field is immutable").
	HazardHookImmutable HazardID = "hook-immutable-template"
	// HazardHookFastFinish: a hook Job that finishes, or is deleted by its TTL, within about a second (the Kyverno
	// cleanup Job), racing Argo CD's observation of its completion.
	HazardHookFastFinish HazardID = "hook-fast-finish"
	// HazardWebhookNamespaceOwned: a webhook configuration controlled by a Namespace, or a Knative webhook
	// Deployment that will make it so; Argo CD does not prune such configurations.
	HazardWebhookNamespaceOwned HazardID = "webhook-namespace-owned"
	// HazardWebhookFailSameApp: a failurePolicy Fail webhook served by a Service of the same app; deleting the app
	// removes the Service first and the webhook then rejects the writes the deletion needs.
	HazardWebhookFailSameApp HazardID = "webhook-fail-same-app"
)

// HazardsAnnotation is the opt-in annotation (parameter annotate=true) naming the hazards left on a rendered
// object, comma-separated, so that they show in the Argo CD UI: a successful plugin's stderr only reaches the
// sidecar's log.
const HazardsAnnotation = "syncmedic.io/hazards"

// FastTTLSeconds is the largest ttlSecondsAfterFinished counted as "gone about as soon as it finishes".
const FastTTLSeconds = 60

// ObjectID identifies a rendered object.
type ObjectID struct {
	APIVersion, Kind, Namespace, Name string
	// Source is the file or template the object was rendered from, when known.
	Source string
}

func (o ObjectID) String() string {
	s := o.Kind + " " + o.Name
	if o.Namespace != "" {
		s = o.Kind + " " + o.Namespace + "/" + o.Name
	}
	if o.Source != "" {
		s += " (" + o.Source + ")"
	}
	return s
}

// Hazard is one lint result.
type Hazard struct {
	ID      HazardID
	Object  ObjectID
	Message string
	// Fix says what to change.
	Fix string
	// AutoFix is the opt-in fix that removes the hazard, or "".
	AutoFix Fix
	// Fixed is set once AutoFix was applied.
	Fixed bool
	doc   int
	obj   *unstructured.Unstructured
}

// LintOptions carry what the linter cannot see in the documents.
type LintOptions struct {
	// AppNamespace is the app's destination namespace, where namespace-less objects go.
	AppNamespace string
	// ChangingTemplates holds the keys (see templateKey) of hook Jobs whose pod template differed between two
	// renders of the same input.
	ChangingTemplates map[string]bool
}

// Lint returns the hazards of the rendered documents, in document order.
func Lint(docs []Doc, o LintOptions) []Hazard {
	var out []Hazard
	services := map[string]bool{}
	for _, d := range docs {
		for _, obj := range d.Objects {
			if obj.GetKind() == "Service" && apiGroup(obj) == "" {
				services[nsOr(obj.GetNamespace(), o.AppNamespace)+"/"+obj.GetName()] = true
			}
		}
	}
	for i, d := range docs {
		for _, obj := range d.Objects {
			id := ObjectID{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: objName(obj), Source: d.Source}
			var hs []Hazard
			switch {
			case obj.GetKind() == "Job" && apiGroup(obj) == "batch" && hook.IsHook(obj):
				hs = lintHookJob(obj, o)
			case isWebhookConfiguration(obj):
				hs = lintWebhookConfiguration(obj, o, services)
			case obj.GetKind() == "Deployment" && apiGroup(obj) == "apps":
				hs = lintKnativeWebhook(obj)
			}
			for _, h := range hs {
				h.Object, h.doc, h.obj = id, i, obj
				out = append(out, h)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].doc < out[b].doc })
	return out
}

func apiGroup(obj *unstructured.Unstructured) string { return obj.GroupVersionKind().Group }

func nsOr(ns, def string) string {
	if ns == "" {
		return def
	}
	return ns
}

func objName(obj *unstructured.Unstructured) string {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		return obj.GetGenerateName() + "*"
	}
	return obj.GetName()
}

// templateKey identifies a Job across two renders.
func templateKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName() + "/" + obj.GetGenerateName()
}

// explicitDeletePolicies returns the delete policies written on obj (Argo CD's and Helm's annotations, as Argo CD
// maps them); Argo CD assumes BeforeHookCreation when there are none (gitops-engine hook.DeletePolicies).
func explicitDeletePolicies(obj *unstructured.Unstructured) []synccommon.HookDeletePolicy {
	if len(resourceutil.GetAnnotationCSVs(obj, synccommon.AnnotationKeyHookDeletePolicy)) == 0 &&
		len(resourceutil.GetAnnotationCSVs(obj, helmDeletePolicyAnnotation)) == 0 {
		return nil
	}
	return hook.DeletePolicies(obj)
}

const helmDeletePolicyAnnotation = "helm.sh/hook-delete-policy"

// hashSuffixRe matches a name ending in a content hash ("migrate-5f7c9d2a"): such a name changes with the template.
var hashSuffixRe = regexp.MustCompile(`-[0-9a-f]{5,}$`)

func lintHookJob(obj *unstructured.Unstructured, o LintOptions) []Hazard {
	var out []Hazard
	policies := explicitDeletePolicies(obj)
	if len(policies) == 0 {
		out = append(out, Hazard{
			ID: HazardHookNoDeletePolicy,
			Message: "hook Job has no delete policy: Argo CD falls back to BeforeHookCreation, so the finished Job stays in the cluster " +
				"until the next sync must delete it (on Argo CD 2.14.3 and 3.x it also keeps argocd.argoproj.io/hook-finalizer until then)",
			Fix: "add annotation argocd.argoproj.io/hook-delete-policy: BeforeHookCreation (or BeforeHookCreation,HookSucceeded " +
				"to remove it once it succeeds); parameter fix=delete-policy adds BeforeHookCreation",
			AutoFix: FixDeletePolicy,
		})
		policies = hook.DeletePolicies(obj)
	}
	fixedName := obj.GetGenerateName() == "" && !hashSuffixRe.MatchString(obj.GetName())
	changing := o.ChangingTemplates[templateKey(obj)]
	if fixedName && (changing || !hasPolicy(policies, synccommon.HookDeletePolicyHookSucceeded)) {
		msg := "hook Job has a fixed name and stays after it succeeds, so the next sync with a changed pod template " +
			"must delete it before creating the new one; while argocd.argoproj.io/hook-finalizer holds the old Job " +
			"(Argo CD 2.14.3, leaks in 3.x) the create fails with \"field is immutable\""
		if changing {
			msg = "hook Job has a fixed name and its pod template changes on every render (random or time-based " +
				"template functions), so every sync must delete the old Job first; while argocd.argoproj.io/hook-finalizer " +
				"holds it (Argo CD 2.14.3, leaks in 3.x) the create fails with \"field is immutable\""
		}
		out = append(out, Hazard{
			ID:      HazardHookImmutable,
			Message: msg,
			Fix: "use metadata.generateName instead of metadata.name (each sync then creates a new Job), or suffix the " +
				"name with a hash of the pod template, or add HookSucceeded to the delete policy",
		})
	}
	if why, ttl := fastFinish(obj); why != "" {
		fix := "make the hook do work Argo CD can observe, or drop it; "
		if ttl {
			fix = "remove spec.ttlSecondsAfterFinished and let the delete policy (HookSucceeded) remove the Job, so Argo CD always sees it complete; "
		}
		out = append(out, Hazard{
			ID: HazardHookFastFinish,
			Message: "hook Job " + why + ": Argo CD can miss the completion of a hook that finishes or disappears before " +
				"it observes it, and the sync then waits forever (the Kyverno cleanup Job; argo-cd #21055, #6880)",
			Fix: fix + "run `syncmedic serve` to recover syncs that still miss it (rule argocd/hook-completion-missed)",
		})
	}
	return out
}

func hasPolicy(ps []synccommon.HookDeletePolicy, p synccommon.HookDeletePolicy) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// stepSepRe separates the steps of a shell command line.
var stepSepRe = regexp.MustCompile(`\s*(;|&&)\s*`)

// trivialRe matches commands that finish at once.
var trivialRe = regexp.MustCompile(`^((/usr)?/bin/)?(true|:|date|exit 0|echo\b[^;&|]*|sleep [01](\.[0-9]+)?s?)$`)

// fastFinish says why obj is expected to finish, or be gone, within about a second ("" if it is not), and whether
// the reason is its TTL.
func fastFinish(obj *unstructured.Unstructured) (string, bool) {
	if ttl, found, _ := unstructured.NestedInt64(obj.Object, "spec", "ttlSecondsAfterFinished"); found && ttl <= FastTTLSeconds {
		return fmt.Sprintf("is deleted %ds after it finishes (spec.ttlSecondsAfterFinished)", ttl), true
	}
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return "", false
	}
	var cmds []string
	for _, c := range containers {
		m, _ := c.(map[string]interface{})
		cmd := commandLine(m)
		if cmd == "" || !trivialCommand(cmd) {
			return "", false
		}
		cmds = append(cmds, cmd)
	}
	return fmt.Sprintf("runs a command that finishes at once (%s)", strings.Join(cmds, "; ")), false
}

// commandLine joins a container's command and args, unwrapping `sh -c '…'`.
func commandLine(c map[string]interface{}) string {
	var parts []string
	for _, key := range []string{"command", "args"} {
		list, _, _ := unstructured.NestedStringSlice(c, key)
		parts = append(parts, list...)
	}
	if len(parts) >= 3 && (strings.HasSuffix(parts[0], "sh") || strings.HasSuffix(parts[0], "bash")) && parts[1] == "-c" {
		parts = parts[2:]
	}
	return strings.TrimSpace(strings.Join(parts, " "))
}

// trivialCommand reports whether every step of a shell command line is trivial, or it is one kubectl call that is
// not waiting for anything (the Kyverno cleanup Job deletes reports with one kubectl call).
func trivialCommand(cmd string) bool {
	if f := strings.Fields(cmd); len(f) > 1 && strings.HasSuffix(f[0], "kubectl") && !strings.ContainsAny(cmd, ";&|") {
		switch f[1] {
		case "delete", "annotate", "label", "patch":
			return !strings.Contains(cmd, "--wait=true")
		}
	}
	for _, step := range stepSepRe.Split(cmd, -1) {
		if step != "" && !trivialRe.MatchString(strings.TrimSpace(step)) {
			return false
		}
	}
	return true
}
