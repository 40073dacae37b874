package argocd

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// The Application finalizers that make Argo CD delete what the application deployed before the Application goes
// (with an optional "/foreground" or "/background" suffix), and the one that runs its PostDelete hooks ("/cleanup"
// while it removes them).
const (
	ResourcesFinalizer  = v1alpha1.ResourcesFinalizerName
	PostDeleteFinalizer = v1alpha1.PostDeleteFinalizerName
)

// postDeleteHook is the hook type Argo CD ≥ 2.10 runs after an application's resources are deleted (argo-cd
// controller/hook.go, unexported there; gitops-engine does not know it).
const postDeleteHook = "PostDelete"

// maxListed bounds the resources named in one evidence line.
const maxListed = 5

// appDeletionFinalizers returns the Argo CD finalizers of an application being deleted.
func appDeletionFinalizers(app *v1alpha1.Application) []string {
	var out []string
	for _, f := range app.Finalizers {
		if strings.HasPrefix(f, ResourcesFinalizer) || strings.HasPrefix(f, PostDeleteFinalizer) {
			out = append(out, f)
		}
	}
	return out
}

// AppDeletionStuck reports an Application deleted longer than the threshold ago that Argo CD's finalizers still
// hold (argo-cd #19571, #11145), and says what blocks it: the deletion error Argo CD recorded (a destination cluster
// it cannot reach), PostDelete hooks that never finished, or the resources it still lists (one stuck terminating in
// the destination blocks the whole deletion).
func AppDeletionStuck(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	app := obs.App
	dt := app.DeletionTimestamp
	fins := appDeletionFinalizers(app)
	if dt == nil || len(fins) == 0 || now.Sub(dt.Time) < th.AppDeletion {
		return nil
	}
	since := dt.Time
	ev := []syncmedic.Evidence{
		{Field: "metadata.deletionTimestamp", Value: dt.UTC().Format(time.RFC3339), Since: &since},
		{Field: "metadata.finalizers", Value: "[" + strings.Join(app.Finalizers, ", ") + "]"},
	}
	var why []string
	for _, c := range app.Status.Conditions {
		if c.Type == v1alpha1.ApplicationConditionDeletionError {
			ev = append(ev, syncmedic.Evidence{Field: "condition " + c.Type, Value: c.Message})
			why = append(why, "Argo CD reports a deletion error: "+c.Message)
		}
	}
	if hasPrefix(fins, PostDeleteFinalizer) {
		var hooks []string
		for _, h := range obs.Hooks {
			if !strings.Contains(h.GetAnnotations()[synccommon.AnnotationKeyHook], postDeleteHook) {
				continue
			}
			state := "running"
			if done, ev := hookFinished(h); done {
				state = ev
			}
			hooks = append(hooks, fmt.Sprintf("%s/%s/%s (%s)", h.GetKind(), h.GetNamespace(), h.GetName(), state))
		}
		if len(hooks) > 0 {
			ev = append(ev, syncmedic.Evidence{Field: "PostDelete hooks", Value: strings.Join(hooks, ", ")})
		}
		why = append(why, "its PostDelete hooks have not all succeeded and been cleaned up (post-delete-finalizer)")
	}
	if n := len(app.Status.Resources); n > 0 && hasPrefix(fins, ResourcesFinalizer) {
		var names []string
		for i, r := range app.Status.Resources {
			if i == maxListed {
				names = append(names, fmt.Sprintf("and %d more", n-maxListed))
				break
			}
			names = append(names, resourceName(r.Group, r.Kind, r.Namespace, r.Name))
		}
		ev = append(ev, syncmedic.Evidence{Field: "resources Argo CD still lists", Value: strings.Join(names, ", ")})
		why = append(why, fmt.Sprintf("Argo CD waits for %d resource(s) to be deleted in the destination; one stuck terminating (finalizers) blocks it", n))
	}
	if len(why) == 0 {
		why = append(why, "no Argo CD controller is removing its finalizer (is the application-controller running and able to reach the cluster?)")
	}
	f := syncmedic.NewFinding(syncmedic.RuleAppDeletionStuck, appObjectRef(obs),
		fmt.Sprintf("Application %s has been deleting for %s: %s", appName(obs), syncmedic.HumanDuration(now.Sub(since)), why[0]))
	f.Since = since
	f.Evidence = append(ev, operationEvidence(app.Status.OperationState)...)
	name := cliAppName(obs)
	f.Remedy = syncmedic.Remedy{
		Description: "Find what holds the deletion: a resource of the app stuck terminating (its own finalizers), a destination cluster Argo CD cannot reach, or a PostDelete hook that never finished; fix that and Argo CD completes the deletion. Removing the Application's finalizers is the last resort: whatever it deployed stays in the cluster, unmanaged.",
		Commands: []string{
			"argocd app resources " + name + "   # what Argo CD still has to delete",
			"argocd app get " + name + " -o json | jq '.status.conditions'",
			fmt.Sprintf("# last resort, leaves the app's resources in the cluster: kubectl -n %s patch application %s --type json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'", app.Namespace, app.Name),
		},
	}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// HookNotDeleted reports an operation that has waited longer than the threshold for the deletion of an old hook
// that is not being deleted at all (the delete never landed: argo-cd #14929 with Server-Side Apply, #20119), or that
// another controller's finalizer holds. A hook held only by Argo CD's own finalizer is argocd/hook-finalizer-stuck's.
func HookNotDeleted(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || op.Phase != synccommon.OperationRunning || !obs.HooksKnown {
		return nil
	}
	var live *unstructured.Unstructured
	if how, ref, ok := parseWaiting(op.Message); ok && how == waitDeletion {
		if live = liveHook(obs, ref); live == nil {
			return nil // gone: gitops-engine creates the new hook on its next pass
		}
	} else if live = heldOldHook(obs, op); live == nil {
		return nil
	}
	var foreign []string
	for _, fin := range live.GetFinalizers() {
		if fin != HookFinalizer {
			foreign = append(foreign, fin)
		}
	}
	deleting := live.GetDeletionTimestamp() != nil
	if deleting && len(foreign) == 0 {
		return nil
	}
	if !deleting && !live.GetCreationTimestamp().Time.Before(op.StartedAt.Time) {
		// Created by this operation: the new hook, which the controller created once the old one was gone, while its
		// message still says it waits for the deletion (seen on v3.6.1 for a second). Not the old hook.
		return nil
	}
	since := op.StartedAt.Time
	if obs.StateSince.After(since) {
		since = obs.StateSince
	}
	if dt := live.GetDeletionTimestamp(); dt != nil && dt.After(since) {
		since = dt.Time
	}
	if now.Sub(since) < th.HookDeletion {
		return nil
	}
	kind, ns, n := live.GetKind(), live.GetNamespace(), live.GetName()
	var summary, desc string
	cmds := []string{}
	if !deleting {
		summary = fmt.Sprintf("Sync of %s has waited %s for the deletion of the old hook %s %s/%s, which was never deleted", appName(obs), syncmedic.HumanDuration(now.Sub(since)), kind, ns, n)
		desc = "Argo CD's delete of the old hook never landed (seen with Server-Side Apply, argo-cd #14929): delete the old hook through Argo CD, and the waiting operation creates the new one."
		del := fmt.Sprintf("argocd app delete-resource %s --kind %s --resource-name %s --namespace %s", cliAppName(obs), kind, n, ns)
		if g := live.GroupVersionKind().Group; g != "" {
			del += " --group " + g
		}
		cmds = append(cmds, del)
	} else {
		summary = fmt.Sprintf("Sync of %s has waited %s for the deletion of the old hook %s %s/%s, held by %s", appName(obs), syncmedic.HumanDuration(now.Sub(since)), kind, ns, n, strings.Join(foreign, ", "))
		desc = "Another controller's finalizer holds the old hook: find why that controller does not release it (is it running?) rather than removing its finalizer by hand; once the hook is gone the waiting operation creates the new one."
		cmds = append(cmds, fmt.Sprintf("kubectl -n %s get %s %s -o jsonpath='{.metadata.finalizers}'", ns, kindLower(kind), n))
	}
	o := hookObjectRef(obs, live)
	f := syncmedic.NewFinding(syncmedic.RuleHookNotDeleted, o, summary)
	f.Since = since
	f.Evidence = append(operationEvidence(op), hookEvidence(live)...)
	if !deleting {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "metadata.deletionTimestamp", Value: "not set: the object is not being deleted"})
	}
	f.Remedy = syncmedic.Remedy{Description: desc, Commands: cmds}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// heldOldHook returns a hook the running operation deleted (its deletionTimestamp is after the operation started)
// that another controller's finalizer holds. The real v2.14.21 application-controller says only "one or more tasks
// are running" while it waits for a BeforeHookCreation hook to go before re-creating it: its gitops-engine's
// "waiting for deletion of" names only pruned resources and hooks deleted on phase completion (v3.6.1 does name it).
func heldOldHook(obs AppObservation, op *v1alpha1.OperationState) *unstructured.Unstructured {
	for _, h := range obs.Hooks {
		dt := h.GetDeletionTimestamp()
		if dt == nil || dt.Time.Before(op.StartedAt.Time.Truncate(time.Second)) {
			continue
		}
		for _, fin := range h.GetFinalizers() {
			if fin != HookFinalizer {
				return h
			}
		}
	}
	return nil
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func resourceName(group, kind, namespace, name string) string {
	gk := kind
	if group != "" {
		gk += "." + group
	}
	if namespace == "" {
		return gk + "/" + name
	}
	return gk + "/" + namespace + "/" + name
}
