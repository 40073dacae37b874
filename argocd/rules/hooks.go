package rules

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// HookFinalizer is the finalizer Argo CD puts on hook objects. gitops-engine v0.7.1 as pinned by argo-cd v2.14.21
// does not export it: only v2.14.3 in 2.x carried it (argo-cd #21901, reverted by #22163); from v3.0.0 it is by
// design.
const HookFinalizer = "argocd.argoproj.io/hook-finalizer"

// helmHookAnnotation is Helm's hook annotation; gitops-engine's pkg/sync/hook/helm reads it as a literal too.
const helmHookAnnotation = "helm.sh/hook"

// IsHook reports whether obj is an Argo CD or Helm hook.
func IsHook(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	if _, ok := a[synccommon.AnnotationKeyHook]; ok {
		return true
	}
	_, ok := a[helmHookAnnotation]
	return ok
}

// hookType returns the hook annotation that makes obj a hook, as "key=value".
func hookType(obj *unstructured.Unstructured) string {
	a := obj.GetAnnotations()
	if v, ok := a[synccommon.AnnotationKeyHook]; ok {
		return synccommon.AnnotationKeyHook + "=" + v
	}
	if v, ok := a[helmHookAnnotation]; ok {
		return helmHookAnnotation + "=" + v
	}
	return ""
}

// FinalizerIndex returns the index of name in obj's finalizers, or -1.
func FinalizerIndex(obj *unstructured.Unstructured, name string) int {
	for i, f := range obj.GetFinalizers() {
		if f == name {
			return i
		}
	}
	return -1
}

// RemoveFinalizerPatch returns the JSON patch that tests that the object is the one with uid (when uid is not
// empty) and that the finalizer at index idx is name, and removes it: it fails, and changes nothing, if the list
// changed in between or if the object was deleted and created again under the same name (a new sync re-creates its
// hooks, and on v3 gitops-engine adds the finalizer at creation: that finalizer belongs to a running hook).
func RemoveFinalizerPatch(idx int, name, uid string) string {
	uidTest := ""
	if uid != "" {
		uidTest = fmt.Sprintf(`{"op":"test","path":"/metadata/uid","value":%q},`, uid)
	}
	return fmt.Sprintf(`[%s{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, uidTest, idx, name, idx)
}

// hookRef identifies a hook the way gitops-engine's messages name it: group/kind/name.
type hookRef struct{ Group, Kind, Name string }

func (h hookRef) String() string { return h.Group + "/" + h.Kind + "/" + h.Name }

func (h hookRef) matches(obj *unstructured.Unstructured) bool {
	return obj.GroupVersionKind().Group == h.Group && obj.GetKind() == h.Kind && obj.GetName() == h.Name
}

// waitingRe matches gitops-engine's running-phase message (pkg/sync/sync_context.go setRunningPhase):
// "waiting for completion of hook batch/Job/migrate and 2 more hooks", "waiting for deletion of /Pod/x" (v2.14),
// "waiting for deletion of hook batch/Job/x" (v3), "waiting for healthy state of apps/Deployment/web",
// "waiting for pruning confirmation of /ConfigMap/x" (v3).
var waitingRe = regexp.MustCompile(`waiting for (completion of hook|deletion of hook|deletion of|healthy state of|pruning confirmation of) ([^/\s]*)/([^/\s]+)/(\S+)`)

// The ways an operation waits, as parseWaiting returns them.
const (
	waitCompletion = "completion of hook"
	waitDeletion   = "deletion of"
	waitHealthy    = "healthy state of"
)

// parseWaiting returns what an operation message says the operation waits for, and how (waitCompletion,
// waitDeletion, waitHealthy or "pruning confirmation of"); v3's "deletion of hook" reads as waitDeletion.
func parseWaiting(msg string) (how string, ref hookRef, ok bool) {
	m := waitingRe.FindStringSubmatch(msg)
	if m == nil {
		return "", hookRef{}, false
	}
	how = m[1]
	if how == "deletion of hook" {
		how = waitDeletion
	}
	return how, hookRef{Group: m[2], Kind: m[3], Name: m[4]}, true
}

// hookFinished reports whether a live hook object has finished, and the evidence for it.
func hookFinished(obj *unstructured.Unstructured) (bool, string) {
	done, ev, _ := hookFinishedAt(obj)
	return done, ev
}

// hookFinishedAt reports whether a live hook object has finished, the evidence, and when it finished (zero when
// the object does not say): a Job's Complete/Failed condition, a Pod's terminal phase and its containers' finishedAt,
// a Workflow's phase and status.finishedAt.
func hookFinishedAt(obj *unstructured.Unstructured) (bool, string, time.Time) {
	switch obj.GetKind() {
	case "Job":
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]interface{})
			t, _ := m["type"].(string)
			s, _ := m["status"].(string)
			if (t == "Complete" || t == "Failed") && s == "True" {
				ts, _ := m["lastTransitionTime"].(string)
				if ts == "" {
					ts, _, _ = unstructured.NestedString(obj.Object, "status", "completionTime") // the Job controller's own record
				}
				return true, fmt.Sprintf("condition %s=True at %s", t, ts), parseTime(ts)
			}
		}
		return false, "", time.Time{}
	case "Pod":
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		if phase != "Succeeded" && phase != "Failed" {
			return false, "", time.Time{}
		}
		var at time.Time
		statuses, _, _ := unstructured.NestedSlice(obj.Object, "status", "containerStatuses")
		for _, c := range statuses {
			ts, _, _ := unstructured.NestedString(asMap(c), "state", "terminated", "finishedAt")
			if t := parseTime(ts); t.After(at) {
				at = t
			}
		}
		return true, "status.phase " + phase, at
	case "Workflow":
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		if phase == "Succeeded" || phase == "Failed" || phase == "Error" {
			ts, _, _ := unstructured.NestedString(obj.Object, "status", "finishedAt")
			return true, "status.phase " + phase, parseTime(ts)
		}
		return false, "", time.Time{}
	}
	return false, "", time.Time{}
}

func asMap(v interface{}) map[string]interface{} { m, _ := v.(map[string]interface{}); return m }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func kindLower(kind string) string { return strings.ToLower(kind) }
