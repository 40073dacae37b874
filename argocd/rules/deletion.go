package rules

import (
	"fmt"
	"slices"
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
	// PreDeleteFinalizer runs an application's PreDelete hooks before anything of it is deleted (Argo CD v3.6:
	// argo-cd v3.6.1 pkg/apis/application/v1alpha1/application_defaults.go:13, not in the v1alpha1 copy here). The
	// controller adds it, with its "/cleanup" stage, to an application whose manifests have a PreDelete hook
	// (controller/appcontroller.go:2133-2147).
	PreDeleteFinalizer = "pre-delete-finalizer.argocd.argoproj.io"
)

// preDeleteCleanup is the stage of PreDeleteFinalizer that removes the PreDelete hooks once the rest is deleted.
const preDeleteCleanup = PreDeleteFinalizer + "/cleanup"

// preDeleteStageError starts the DeletionError condition of a pass that ran the PreDelete hooks and failed (argo-cd
// v3.6.1 controller/appcontroller.go:1406, "error executing pre-delete hooks: PreDelete hook(s) failed: ns/name"). The
// controller writes that condition and never removes it (a pass without error clears it only in its own copy of the
// Application, appcontroller.go:1134-1136), so it stays after the pass that removes PreDeleteFinalizer.
const preDeleteStageError = "error executing pre-delete hooks"

// The hook types Argo CD runs around an application's deletion (argo-cd controller/hook.go, unexported there;
// gitops-engine does not know them), and Helm's names for them.
const (
	preDeleteHook      = "PreDelete"
	postDeleteHook     = "PostDelete"
	helmPreDeleteHook  = "pre-delete"
	helmPostDeleteHook = "post-delete"
)

// maxListed bounds the resources named in one evidence line.
const maxListed = 5

// appDeletionFinalizers returns the Argo CD finalizers of an application being deleted.
func appDeletionFinalizers(app *v1alpha1.Application) []string {
	var out []string
	for _, f := range app.Finalizers {
		if strings.HasPrefix(f, ResourcesFinalizer) || strings.HasPrefix(f, PostDeleteFinalizer) || strings.HasPrefix(f, PreDeleteFinalizer) {
			out = append(out, f)
		}
	}
	return out
}

// isDeleteHook reports whether obj is a hook of the given type, as argo-cd v3.6.1 controller/hook.go:45-60 reads it:
// argocd.argoproj.io/hook or helm.sh/hook, each a comma-separated list.
func isDeleteHook(obj *unstructured.Unstructured, argoType, helmType string) bool {
	a := obj.GetAnnotations()
	for key, want := range map[string]string{synccommon.AnnotationKeyHook: argoType, helmHookAnnotation: helmType} {
		v, ok := a[key]
		if !ok {
			continue
		}
		for _, item := range strings.Split(v, ",") {
			if strings.TrimSpace(item) == want {
				return true
			}
		}
	}
	return false
}

// deleteHooks lists the observed hooks of one deletion type with their state, and whether one of them failed.
func deleteHooks(obs AppObservation, argoType, helmType string) (listed []string, failed bool) {
	for _, h := range obs.Hooks {
		if !isDeleteHook(h, argoType, helmType) {
			continue
		}
		state := "running"
		if done, ev := hookFinished(h); done {
			state = ev
			failed = failed || strings.Contains(ev, "Failed")
		}
		listed = append(listed, fmt.Sprintf("%s/%s/%s (%s)", h.GetKind(), h.GetNamespace(), h.GetName(), state))
	}
	return listed, failed
}

// AppDeletionStuck reports an Application deleted longer than the threshold ago that Argo CD's finalizers still
// hold (argo-cd #19571, #11145), and says what blocks it: the deletion error Argo CD recorded (a destination cluster
// it cannot reach), PreDelete hooks that have not succeeded, the resources it still lists (one stuck terminating in
// the destination blocks the whole deletion), or PostDelete hooks that never finished.
//
// The controller works through the finalizers in a fixed order (argo-cd v3.6.1 controller/appcontroller.go:1397-1528):
// the PreDelete hooks (pre-delete-finalizer) must all succeed before anything is deleted — a failed one is deleted and
// created again on the next pass, and nothing else happens until it succeeds (controller/hook.go:245-255) — then the
// resources (resources-finalizer), the PostDelete hooks, and the cleanup of the PreDelete and PostDelete hooks. The
// first stage still held is what blocks the deletion.
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
	preDelete := slices.Contains(fins, PreDeleteFinalizer)
	// While the pre-delete finalizer holds the app, its PreDelete hooks are the reason (Argo CD deletes nothing until
	// they succeed): that reason leads the summary, and any other deletion error the controller reported meanwhile
	// (a resource of the app already gone, say) follows it.
	var why, errs []string
	for _, c := range app.Status.Conditions {
		if c.Type != v1alpha1.ApplicationConditionDeletionError {
			continue
		}
		if !preDelete && strings.HasPrefix(c.Message, preDeleteStageError) {
			// Left over: the controller removes pre-delete-finalizer only after a pass of that stage without error,
			// and never clears the condition an earlier pass wrote. Not a reason; shown as what it is.
			ev = append(ev, syncmedic.Evidence{Field: "condition " + c.Type + " (left from the PreDelete stage, which Argo CD has passed: pre-delete-finalizer is gone)", Value: c.Message})
			continue
		}
		ev = append(ev, syncmedic.Evidence{Field: "condition " + c.Type, Value: c.Message})
		if !(preDelete && strings.Contains(c.Message, "pre-delete hooks")) {
			errs = append(errs, "Argo CD reports a deletion error: "+c.Message)
		}
	}
	if preDelete {
		hooks, failed := deleteHooks(obs, preDeleteHook, helmPreDeleteHook)
		if len(hooks) > 0 {
			ev = append(ev, syncmedic.Evidence{Field: "PreDelete hooks", Value: strings.Join(hooks, ", ")})
		}
		if msg := preDeleteFailure(app); msg != "" || failed {
			if msg == "" {
				msg = "a PreDelete hook failed"
			}
			why = append(why, msg+": Argo CD deletes a failed PreDelete hook and runs it again, pass after pass, and deletes nothing of the app until every PreDelete hook succeeds (pre-delete-finalizer)")
		} else {
			why = append(why, "its PreDelete hooks have not all succeeded: Argo CD deletes nothing of the app until they do (pre-delete-finalizer)")
		}
	}
	why = append(why, errs...)
	if hasPrefix(fins, PostDeleteFinalizer) {
		hooks, _ := deleteHooks(obs, postDeleteHook, helmPostDeleteHook)
		if len(hooks) > 0 {
			ev = append(ev, syncmedic.Evidence{Field: "PostDelete hooks", Value: strings.Join(hooks, ", ")})
		}
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
		if !preDelete {
			why = append(why, fmt.Sprintf("Argo CD waits for %d resource(s) to be deleted in the destination; one stuck terminating (finalizers) blocks it", n))
		}
	}
	if hasPrefix(fins, PostDeleteFinalizer) && !preDelete {
		why = append(why, "its PostDelete hooks have not all succeeded and been cleaned up (post-delete-finalizer)")
	}
	if slices.Contains(fins, preDeleteCleanup) && !preDelete {
		why = append(why, "Argo CD waits for its PreDelete hooks to be deleted (pre-delete-finalizer/cleanup); one stuck terminating (finalizers) blocks it")
	}
	if len(why) == 0 {
		why = append(why, "no Argo CD controller is removing its finalizer (is the application-controller running and able to reach the cluster?)")
	}
	f := syncmedic.NewFinding(syncmedic.RuleAppDeletionStuck, appObjectRef(obs),
		fmt.Sprintf("Application %s has been deleting for %s: %s", appName(obs), syncmedic.HumanDuration(now.Sub(since)), why[0]))
	f.Since = since
	f.Evidence = append(ev, operationEvidence(app.Status.OperationState)...)
	f.Remedy = deletionRemedy(obs, preDelete)
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// preDeleteFailure returns what the DeletionError condition says about failed PreDelete hooks ("PreDelete hook(s)
// failed: ns/name", argo-cd v3.6.1 controller/hook.go:254, wrapped at controller/appcontroller.go:1406), or "". The
// condition is there only once a pass has seen a hook fail; the controller never removes it (preDeleteStageError).
func preDeleteFailure(app *v1alpha1.Application) string {
	const failed = preDeleteHook + " hook(s) failed: "
	for _, c := range app.Status.Conditions {
		if c.Type != v1alpha1.ApplicationConditionDeletionError {
			continue
		}
		if i := strings.Index(c.Message, failed); i >= 0 {
			return "its PreDelete hook(s) " + strings.TrimSpace(c.Message[i+len(failed):]) + " failed"
		}
	}
	return ""
}

// deletionRemedy is what a person does about a stuck application deletion; preDelete is true while the PreDelete
// hooks hold it.
func deletionRemedy(obs AppObservation, preDelete bool) syncmedic.Remedy {
	app := obs.App
	name := cliAppName(obs)
	if preDelete {
		i := slices.Index(app.Finalizers, PreDeleteFinalizer)
		return syncmedic.Remedy{
			Description: "A PreDelete hook has to succeed before Argo CD deletes anything of the app: read why it fails (its Job's Pod logs), fix it in the app's source — Argo CD creates the hook from git on each pass — and the deletion goes on by itself. " +
				"Removing only the pre-delete finalizer skips the PreDelete hooks (whatever they were to do before the deletion is not done) and lets Argo CD delete the app's resources.",
			Commands: []string{
				"argocd app resources " + name + "   # the PreDelete hooks are among them",
				"argocd app get " + name + " -o json | jq '.status.conditions'",
				fmt.Sprintf("# skips the PreDelete hooks: kubectl -n %s patch application %s --type json -p '%s'", app.Namespace, app.Name, RemoveFinalizerPatch(i, PreDeleteFinalizer, string(app.UID))),
			},
		}
	}
	return syncmedic.Remedy{
		Description: "Find what holds the deletion: a resource of the app stuck terminating (its own finalizers), a destination cluster Argo CD cannot reach, or a PostDelete hook that never finished; fix that and Argo CD completes the deletion. Removing the Application's finalizers is the last resort: whatever it deployed stays in the cluster, unmanaged.",
		Commands: []string{
			"argocd app resources " + name + "   # what Argo CD still has to delete",
			"argocd app get " + name + " -o json | jq '.status.conditions'",
			fmt.Sprintf("# last resort, leaves the app's resources in the cluster: kubectl -n %s patch application %s --type json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'", app.Namespace, app.Name),
		},
	}
}

// HookNotDeleted reports an operation that has waited longer than the threshold for the deletion of an old hook
// that is not being deleted at all (the delete never landed: argo-cd #14929 with Server-Side Apply, #20119), or that
// another controller's finalizer holds. A hook held only by Argo CD's own finalizer is argocd/hook-finalizer-stuck's.
// Nothing is reported while the controller has set the operation aside (OperationPause): a sync window or a retry
// backoff, not the old hook, is then what the operation waits for.
func HookNotDeleted(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || op.Phase != synccommon.OperationRunning || !obs.HooksKnown || OperationPause(op) != NotPaused {
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
