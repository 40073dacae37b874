package rules

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Evaluate runs every Argo CD rule of the catalog against one application observation. The generic
// argocd/operation-stuck finding is left out when a more specific rule already explains the same operation (an
// operation waiting for a resource's health is argocd/waiting-for-health's, an operation state with no operation
// behind it argocd/operation-orphaned's).
func Evaluate(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	if obs.App == nil {
		return nil
	}
	// While the application-controller does not process the app, nothing about its operation is decided: the
	// controller alone records hooks and ends operations, so that finding is the only one.
	out := ControllerNotProcessing(obs, now, th)
	if len(out) > 0 {
		for i := range out {
			out[i].Advisories = append(out[i].Advisories, Advisories(obs.ServerVersion, out[i].Rule)...)
		}
		return out
	}
	// In order of precedence: one object gets one plan (see onePlanPerObject).
	out = append(out, HookImmutable(obs, now, th)...)
	out = append(out, HookFinalizerStuck(obs, now, th)...)
	out = append(out, HookNotDeleted(obs, now, th)...)
	out = append(out, HookCompletionMissed(obs, now, th)...)
	out = onePlanPerObject(out)
	out = append(out, AppDeletionStuck(obs, now, th)...)
	if !Orphaned(obs.App) { // its advice, terminate, is refused there: argocd/operation-orphaned's instead
		out = append(out, WaitingForHealth(obs, now, th)...)
	}
	out = append(out, AutoSyncNotRetried(obs, now, th)...)
	out = append(out, OperationOrphaned(obs, now, th)...)
	if len(out) == 0 {
		out = append(out, OperationStuck(obs, now, th)...)
	}
	for i := range out {
		out[i].Advisories = append(out[i].Advisories, Advisories(obs.ServerVersion, out[i].Rule)...)
	}
	return out
}

// onePlanPerObject keeps, for each object, only the first finding of fs (the rules run in order of precedence) and
// adds the summaries of the others to its evidence, so one hook never gets two incidents with two remedies: a failed
// sync on an immutable hook held by the finalizer is one hook-immutable plan (remove the finalizer, then sync), and a
// deleted hook the operation waits on is first released from the finalizer (hook-finalizer-stuck), which is the
// minimal action, before anything terminates the operation.
func onePlanPerObject(fs []syncmedic.Finding) []syncmedic.Finding {
	if len(fs) < 2 {
		return fs
	}
	kept := map[string]int{}
	out := fs[:0:0]
	for _, f := range fs {
		key := syncmedic.ObjectKey(f.Object)
		if i, ok := kept[key]; ok {
			out[i].Evidence = append(out[i].Evidence, syncmedic.Evidence{Field: "also (" + string(f.Rule) + ")", Value: f.Summary})
			continue
		}
		kept[key] = len(out)
		out = append(out, f)
	}
	return out
}

// HookFinalizerStuck reports hook objects held by argocd.argoproj.io/hook-finalizer: deleted longer than the
// threshold ago while nothing will release them, or carrying the finalizer while the application has no operation
// running (orphaned by a downgrade from v2.14.3, or leaked by a 3.x path).
//
// A deleted hook that keeps the finalizer while its operation runs is left to the application-controller unless the
// controller is processing the operation and cannot release it:
//   - nothing is reported while the controller has set the operation aside (OperationPause: a sync window blocks it,
//     or it waits for its retry backoff), or while it is Terminating (gitops-engine's Terminate removes the hook
//     finalizers itself in the pass that ends the operation: v3.6.1 sync_context.go:743-768, the v3.0.12 engine's
//     sync_context.go:1180-1195). Removing the finalizer of a hook whose completion the controller has not recorded
//     makes it vanish unseen: v3.6.1 then fails the operation ("Resource … is missing", gitops-engine
//     sync_context.go:595-609), v3.0.x waits for it forever (argo-cd #21055);
//   - a hook the operation waits on another task beside is not stuck: gitops-engine (v3) removes the finalizer of a
//     completed hook only once nothing else in the wave is running, so a fast hook Job deleted by its TTL beside a
//     slow hook stays, deleting, until the slow one ends;
//   - a hook whose completion the operation still waits for (its sync result Running or Pending, or the message
//     "waiting for completion of hook" naming it) is reported only when the controller has looked since the hook
//     was deleted (lookedSince: a change of the operation state seen, or a reconciliation, after the deletion). On each pass gitops-engine
//     reads a running hook's live object — still there, held by the finalizer — and records it finished (v3.6.1
//     sync_context.go:558-571), so a result still Running after such a pass is one the controller cannot settle,
//     while a result with no pass since is only a slow controller's;
//   - a hook the operation waits to delete (the message "waiting for deletion of [hook] G/K/N" naming it, written by
//     the pass that deleted it or found it deleting), or one deleted while the operation visibly waits on nothing,
//     is stuck past the threshold counted from the later of the deletion and the operation's last change.
func HookFinalizerStuck(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	app := obs.App
	op := app.Status.OperationState
	running := op != nil && (op.Phase == synccommon.OperationRunning || op.Phase == synccommon.OperationTerminating)
	var out []syncmedic.Finding
	for _, h := range obs.Hooks {
		idx := FinalizerIndex(h, HookFinalizer)
		if idx < 0 || !IsHook(h) {
			continue
		}
		var summary string
		var since time.Time
		var extra []syncmedic.Evidence
		if dt := h.GetDeletionTimestamp(); dt != nil {
			since = dt.Time
			if running {
				if op.Phase == synccommon.OperationTerminating || OperationPause(op) != NotPaused {
					continue // the controller is not processing the operation: nothing is decided about its hooks
				}
				how, onThis := waitingOn(op, h)
				if !onThis && how != "" {
					continue // the wave still runs another task: gitops-engine releases the finalizer when it ends
				}
				if onThis && how == waitCompletion && !lookedSince(obs, dt.Time, now) {
					continue // no pass of the controller since the deletion: it has not yet seen the hook finish
				}
				// Waiting on this hook, or on nothing visible: count from the later of the deletion and the last
				// change of the operation, so a wave that just moved on gets the whole threshold.
				if obs.StateSince.After(since) {
					since = obs.StateSince
				}
				if how != "" {
					extra = append(extra, syncmedic.Evidence{Field: "operation waits for", Value: how + " this hook"})
				}
				if onThis && how == waitCompletion {
					extra = append(extra, reconciledEvidence(app)) // the controller looked since, and still waits
				}
			}
			if now.Sub(since) < th.HookFinalizer {
				continue
			}
			summary = fmt.Sprintf("%s %s/%s is stuck terminating: Argo CD's hook finalizer was never removed", h.GetKind(), h.GetNamespace(), h.GetName())
		} else {
			if running {
				continue // a live operation still owns its hooks: the near miss of the seed incident
			}
			since = h.GetCreationTimestamp().Time
			if op != nil && op.FinishedAt != nil {
				since = op.FinishedAt.Time
			}
			if now.Sub(since) < th.HookFinalizer {
				continue
			}
			summary = fmt.Sprintf("%s %s/%s keeps Argo CD's hook finalizer with no operation running: it will block its own deletion and the next hook of that name", h.GetKind(), h.GetNamespace(), h.GetName())
		}
		f := syncmedic.NewFinding(syncmedic.RuleHookFinalizerStuck, hookObjectRef(obs, h), summary)
		f.Since = since
		f.Evidence = append(append(hookEvidence(h), operationEvidence(op)...), extra...)
		// The minimal remedy: once the object is gone, an operation waiting for its deletion creates the new hook
		// by itself (gitops-engine retries the delete), so nothing is terminated and no hook re-runs.
		f.Remedy = removeFinalizerRemedy(obs, h, idx, false)
		f.Links = appLinks(obs)
		out = append(out, f)
	}
	return out
}

// waitingOn says how a running operation waits: how is "" when nothing it waits on is visible (no parsable
// message and no hook result Running/Pending), and onThis is true when it waits on obj itself.
func waitingOn(op *v1alpha1.OperationState, obj *unstructured.Unstructured) (how string, onThis bool) {
	if h, ref, ok := parseWaiting(op.Message); ok {
		how = h
		if ref.matches(obj) {
			return how, true
		}
	}
	for _, r := range waitingHooks(op) {
		if r.matches(obj) {
			return waitCompletion, true
		}
		how = waitCompletion
	}
	return how, false
}

// HookCompletionMissed reports an operation Running while it waits for a hook whose live object already finished,
// or is not found, for longer than the threshold: the fast-Job race (argo-cd #21055, #6880). The time — the
// threshold and the "has waited" of the summary alike — counts from when the hook finished (a Job's Complete or
// Failed condition, a Pod's last container's finishedAt, a Workflow's finishedAt), or from the operation's last change
// (startedAt, or StateSince when later) when that is later or the hook is not found — so not from a retried
// operation's startedAt, which it keeps across its earlier attempts and their backoff, once the hook of the current
// attempt finished. The resource tree comes from the controller's cache and lags it by seconds, so a hook that just
// finished or was just created is not missed.
//
// Nothing is reported while the controller has set the operation aside (OperationPause): a sync window returns before
// gitops-engine runs (v2.14.21 controller/sync.go:176-186), and a retry backoff keeps the failed attempt's results,
// so in both a hook that finished still shows Running, and the controller records it once it resumes.
//
// A hook is missed only when the controller has reconciled the application after the hook finished (or after the
// time the not-found hook is judged from) and the operation still waits for it (reconciledSince: status.reconciledAt
// later than that, its first such reconciliation OperationPassBound before now). Every Argo CD version writes
// reconciledAt; an application without it (a hand-made status, an old syncmedic dump) gives no evidence either way and
// is judged by the watcher's own signs, as before: a finished hook that still carries the hook finalizer only after a
// change of the operation seen since it finished (lookedSince). Argo CD re-reads running hooks only when its controller processes
// the app; while the controller is down, restarting, or the replica owning the app's shard is gone, argocd-server
// still shows the hook finished, and a terminate would end a healthy sync as "Operation terminated" once the
// controller is back (seen on v2.14.21). That case is argocd/controller-not-processing's (ControllerNotProcessing).
func HookCompletionMissed(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || op.Phase != synccommon.OperationRunning || !obs.HooksKnown || OperationPause(op) != NotPaused {
		return nil
	}
	lastChange := op.StartedAt.Time
	if obs.StateSince.After(lastChange) {
		lastChange = obs.StateSince
	}
	waiting := waitingHooks(op)
	// While another hook the operation waits on is still running, the operation is progressing, and terminating it
	// would kill that hook (a migration, partway): seen on v2.14.21 with a TTL-deleted fast hook beside a slow one.
	// A hook the operation waits on that finished only just now is the controller's to record on its next pass
	// (which rewrites the operation): a hook not found is judged from then, not earlier, or the finding would open
	// and, at that pass, close again.
	var othersDone time.Time
	for _, ref := range waiting {
		if live := liveHook(obs, ref); live != nil && live.GetDeletionTimestamp() == nil {
			done, _, at := hookFinishedAt(live)
			if !done {
				return nil
			}
			if at.After(othersDone) {
				othersDone = at
			}
		}
	}
	var out []syncmedic.Finding
	for _, ref := range waiting {
		live := liveHook(obs, ref)
		var why string
		since := lastChange
		var finished time.Time // when the hook finished, when it did and its object records when
		if live == nil {
			why = "not found in Argo CD's resource tree (deleted — by its TTL or a delete policy — before Argo CD saw it finish)"
			if othersDone.After(since) {
				since = othersDone
			}
		} else if done, ev, at := hookFinishedAt(live); done {
			if FinalizerIndex(live, HookFinalizer) >= 0 && !lookedSince(obs, at, now) {
				continue // held for the controller, which has not looked since it finished
			}
			why = "finished: " + ev
			finished = at
			if at.After(since) {
				since = at
			}
		} else {
			continue
		}
		if now.Sub(since) < th.HookCompletion {
			continue
		}
		if obs.App.Status.ReconciledAt != nil && !reconciledSince(obs, since, now) {
			continue // the controller has not looked since (it may be away: ControllerNotProcessing's)
		}
		o := appObjectRef(obs)
		if live != nil {
			o = hookObjectRef(obs, live)
		} else {
			o.Group, o.Kind, o.Name, o.Version = ref.Group, ref.Kind, ref.Name, ""
			o.Namespace = obs.App.Spec.Destination.Namespace
		}
		f := syncmedic.NewFinding(syncmedic.RuleHookCompletionMissed, o, completionMissedSummary(obs, ref, live != nil, now, since, finished))
		f.Since = since
		f.Evidence = append(operationEvidence(op), reconciledEvidence(obs.App), syncmedic.Evidence{Field: "hook " + ref.String(), Value: why})
		if live != nil {
			f.Evidence = append(f.Evidence, hookEvidence(live)...)
		}
		f.Remedy = resyncRemedy(obs, "Terminate the stuck operation, wait until it has stopped, then sync the same revision with the same options. "+
			"The new sync runs every hook of the application again (BeforeHookCreation deletes and recreates them), this one included: "+
			"make sure re-running them is harmless (database migrations!) before you do it.")
		f.Remedy.Params[ParamEvidenceAt] = since.UTC().Format(time.RFC3339)
		f.Links = appLinks(obs)
		out = append(out, f)
	}
	return out
}

// completionMissedSummary says how long the sync has waited for the hook ref since it could have seen it done (since,
// when the rule's threshold started counting): since the hook finished (finished, zero when its object does not
// record when), or since the operation's last change when that is later or the hook is not found (found false) —
// not since the operation started when anything later is known: a retried operation keeps its startedAt across its
// earlier attempts and their backoff.
func completionMissedSummary(obs AppObservation, ref hookRef, found bool, now, since, finished time.Time) string {
	waited := syncmedic.HumanDuration(now.Sub(since))
	switch {
	case !found:
		return fmt.Sprintf("Sync of %s has waited %s for hook %s, which is not found", appName(obs), waited, ref)
	case finished.IsZero():
		return fmt.Sprintf("Sync of %s is still waiting for hook %s, which already finished (its object does not record when); the operation last changed %s ago", appName(obs), ref, waited)
	case !since.After(finished):
		return fmt.Sprintf("Sync of %s has waited %s for hook %s since it finished", appName(obs), waited, ref)
	default:
		return fmt.Sprintf("Sync of %s has waited %s for hook %s, which finished %s ago", appName(obs), waited, ref, syncmedic.HumanDuration(now.Sub(finished)))
	}
}

// HookImmutable reports a failed operation whose message says "field is immutable" about a hook whose previous
// object still exists, held by the hook finalizer or stuck deleting (argo-cd #22142).
func HookImmutable(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || (op.Phase != synccommon.OperationFailed && op.Phase != synccommon.OperationError) || !obs.HooksKnown {
		return nil
	}
	messages := immutableMessages(op)
	if len(messages) == 0 {
		return nil
	}
	var out []syncmedic.Finding
	for _, h := range obs.Hooks {
		if !IsHook(h) {
			continue
		}
		msg, ok := messages[hookRef{Group: h.GroupVersionKind().Group, Kind: h.GetKind(), Name: h.GetName()}]
		if !ok {
			msg, ok = messages[hookRef{}] // an operation message that names no resource at all
		}
		if !ok {
			continue
		}
		idx := FinalizerIndex(h, HookFinalizer)
		deleting := h.GetDeletionTimestamp() != nil
		if idx < 0 && !deleting && deletesBeforeCreation(h) {
			continue // Argo CD deletes it before creating the new one: it is not what blocks the sync
		}
		if idx < 0 && deleting && now.Sub(h.GetDeletionTimestamp().Time) < th.HookFinalizer {
			// Being deleted (a person's delete-resource, the garbage collector's foreground deletion): it is going
			// away by itself, and a sync now would only race the person's own sync. Stuck only past the threshold.
			continue
		}
		why := "because the old hook still exists"
		switch {
		case idx >= 0 && !deleting && !deletesBeforeCreation(h):
			why += ", kept by its delete policy (HookSucceeded keeps a hook that failed) and carrying Argo CD's hook finalizer"
		case idx >= 0:
			why += ", held by Argo CD's hook finalizer"
		case deleting:
			why += ", stuck deleting"
		default:
			why += ", kept by its delete policy (HookSucceeded keeps a hook that failed)"
		}
		f := syncmedic.NewFinding(syncmedic.RuleHookImmutable, hookObjectRef(obs, h),
			fmt.Sprintf("Sync of %s failed: %s %s/%s cannot be replaced (field is immutable) %s", appName(obs), h.GetKind(), h.GetNamespace(), h.GetName(), why))
		if op.FinishedAt != nil {
			f.Since = op.FinishedAt.Time
		}
		f.Evidence = append(operationEvidence(op), syncmedic.Evidence{Field: "error", Value: msg})
		f.Evidence = append(f.Evidence, hookEvidence(h)...)
		keptByPolicy := !deleting && !deletesBeforeCreation(h)
		switch {
		case idx >= 0 && keptByPolicy:
			// The finalizer does not keep this hook: its delete policy does, and a sync after removing the
			// finalizer fails the same way. Remove the finalizer (so the hook can go at all: deleted, it would stay
			// deleting), then a person deletes the old hook and syncs, as for any hook its policy keeps. Seen on the
			// real v2.14.21 controller with a failed HookSucceeded hook that v2.14.3 left the finalizer on.
			f.Remedy = removeFinalizerRemedy(obs, h, idx, false)
			f.Remedy.Description += " The old hook stays afterwards, kept by its delete policy (HookSucceeded keeps a hook that failed), and every sync fails until it goes: then delete it through Argo CD and sync again (the hooks run again)."
			f.Remedy.Commands = append(f.Remedy.Commands, keptHookCommands(obs, h)...)
		case idx >= 0:
			f.Remedy = removeFinalizerRemedy(obs, h, idx, true)
		case deleting:
			// A sync cannot help while the old object exists: it fails the same way. What holds it is on the object.
			f.Remedy = syncmedic.Remedy{
				Description: fmt.Sprintf("The old hook has been deleting since %s and does not go: look at what holds it (its finalizers: %v, and its dependents under foreground deletion); once it is gone, sync again (the hooks run again).",
					h.GetDeletionTimestamp().UTC().Format(time.RFC3339), h.GetFinalizers()),
				Commands: []string{
					fmt.Sprintf("kubectl -n %s get %s %s -o jsonpath='{.metadata.finalizers}'", h.GetNamespace(), strings.ToLower(h.GetKind()), h.GetName()),
					plainSyncCommand(obs),
				},
			}
		default:
			// Every sync fails the same way until the old object goes: delete it through Argo CD, then sync.
			f.Remedy = syncmedic.Remedy{
				Description: "The old hook object stays because its delete policy keeps it (HookSucceeded keeps a failed hook; add BeforeHookCreation to the policy), and every sync fails until it goes: delete it through Argo CD, then sync again (the hooks run again).",
				Commands:    keptHookCommands(obs, h),
			}
		}
		f.Links = appLinks(obs)
		out = append(out, f)
	}
	return out
}

// keptHookCommands are what a person runs for an old hook its delete policy keeps: delete it through Argo CD, then
// sync.
func keptHookCommands(obs AppObservation, h *unstructured.Unstructured) []string {
	del := fmt.Sprintf("argocd app delete-resource %s --kind %s --resource-name %s --namespace %s", cliAppName(obs), h.GetKind(), h.GetName(), h.GetNamespace())
	if g := h.GroupVersionKind().Group; g != "" {
		del += " --group " + g
	}
	return []string{del, plainSyncCommand(obs)}
}

// plainSyncCommand is the `argocd app sync` a person runs to sync the application again as its last operation did.
func plainSyncCommand(obs AppObservation) string {
	p := map[string]string{}
	syncParams(obs, p)
	return syncCommand(obs, p)
}

// OperationStuck reports any operation Running or Terminating past the threshold with no change in its state.
//
// An operation a sync window blocks is reported, past the threshold, as blocked, with no remedy at all: the
// controller resumes it when the window allows it, a new sync is refused meanwhile, and before v3.6 a terminate waits
// for the window too (controller/sync.go checks the window before it terminates: v2.14.21 lines 176 and 410, v3.0.12
// lines 171 and 404; v3.6.1 line 194 exempts a Terminating operation), leaving it Terminating until the window ends. An operation
// waiting to retry is on schedule until its next attempt is due (RetryDue); its threshold counts from then, since
// the backoff — up to the retry strategy's maxDuration, unbounded with limit -1 — can be longer than the threshold.
func OperationStuck(obs AppObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	op := obs.App.Status.OperationState
	if op == nil || (op.Phase != synccommon.OperationRunning && op.Phase != synccommon.OperationTerminating) {
		return nil
	}
	since := stuckSince(obs, op)
	due, retrying := RetryDue(op)
	if now.Sub(since) < th.OperationStuck {
		return nil
	}
	f := syncmedic.NewFinding(syncmedic.RuleOperationStuck, appObjectRef(obs),
		fmt.Sprintf("Operation on %s has been %s for %s with no change", appName(obs), op.Phase, syncmedic.HumanDuration(now.Sub(since))))
	f.Since = since
	f.Evidence = operationEvidence(op)
	if !obs.StateSince.IsZero() {
		t := obs.StateSince
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "last state change", Value: t.UTC().Format(time.RFC3339), Since: &t})
	}
	f.Remedy = resyncRemedy(obs, "Terminate the operation and sync the same revision again; check the last message first, the operation may be waiting on something real.")
	f.Remedy.AutoSafe = false
	f.Remedy.Params[ParamEvidenceAt] = since.UTC().Format(time.RFC3339)
	switch {
	case op.Phase == synccommon.OperationTerminating:
		f.Remedy.Description = "The operation does not finish terminating: look for a resource stuck deleting (finalizers) in the app, and for a sync window of its project (before v3.6 a window holds a terminate until it ends: argo-cd #20799, #25361); then sync again."
	case OperationPause(op) == PausedBySyncWindow:
		f.Summary = fmt.Sprintf("Sync of %s has been blocked by a sync window of project %s for %s: Argo CD resumes it when the window allows it",
			appName(obs), obs.App.Spec.Project, syncmedic.HumanDuration(now.Sub(since)))
		f.Remedy = windowBlockedRemedy(obs)
	case retrying:
		t := due
		f.Summary = fmt.Sprintf("Operation on %s was due to retry (attempt #%d) %s ago and has not", appName(obs), op.RetryCount, syncmedic.HumanDuration(now.Sub(due)))
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "next retry due", Value: t.UTC().Format(time.RFC3339), Since: &t})
	}
	f.Links = appLinks(obs)
	return []syncmedic.Finding{f}
}

// stuckSince is when argocd/operation-stuck starts counting on the Running or Terminating op of obs: its last change
// (startedAt, or StateSince when later) or, for an operation waiting to retry, when the retry is due if that is later.
// OperationStuck and NextDeadline both read it, so serve wakes up when the rule can first fire.
func stuckSince(obs AppObservation, op *v1alpha1.OperationState) time.Time {
	since := op.StartedAt.Time
	if !obs.StateSince.IsZero() && obs.StateSince.After(since) {
		since = obs.StateSince
	}
	if due, retrying := RetryDue(op); retrying && due.After(since) {
		since = due
	}
	return since
}

// windowBlockedRemedy is what a person does about an operation a sync window blocks: nothing to apply, only the
// windows to read.
func windowBlockedRemedy(obs AppObservation) syncmedic.Remedy {
	return syncmedic.Remedy{
		Action: syncmedic.ActionNone,
		Description: "A sync window of the project denies this operation now (a deny window, or no allow window open; manualSync: true lets only operations a person started through): " +
			"the application-controller leaves it Running, untouched, and resumes it when the window allows it. Wait for the window to end, or change the window if the sync must run now. " +
			"Do not terminate it meanwhile: a new sync is refused during the window, and before v3.6 the terminate itself waits for the window (argo-cd #20799, #25361).",
		Commands: []string{
			"argocd proj windows list " + obs.App.Spec.Project,
			"argocd app get " + cliAppName(obs),
		},
	}
}

// liveHook returns the observed live object of ref, or nil.
func liveHook(obs AppObservation, ref hookRef) *unstructured.Unstructured {
	for _, h := range obs.Hooks {
		if ref.matches(h) {
			return h
		}
	}
	return nil
}

// waitingHooks returns the hooks an operation waits for: results with a hook phase still Running or Pending, and the
// hook named in the operation message.
func waitingHooks(op *v1alpha1.OperationState) []hookRef {
	var refs []hookRef
	seen := map[hookRef]bool{}
	add := func(r hookRef) {
		if !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	if op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			if r.HookType != "" && (r.HookPhase == synccommon.OperationRunning || r.HookPhase == "Pending") {
				add(hookRef{Group: r.Group, Kind: r.Kind, Name: r.Name})
			}
		}
	}
	if how, ref, ok := parseWaiting(op.Message); ok && how == waitCompletion {
		add(ref)
	}
	return refs
}

// immutableMessages returns the "field is immutable" errors of a failed operation by the resource they name; the
// zero hookRef keys a message that names no resource.
func immutableMessages(op *v1alpha1.OperationState) map[hookRef]string {
	out := map[hookRef]string{}
	if op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			if strings.Contains(r.Message, "field is immutable") {
				out[hookRef{Group: r.Group, Kind: r.Kind, Name: r.Name}] = r.Message
			}
		}
	}
	if strings.Contains(op.Message, "field is immutable") {
		// The apiserver's error names the object: `Job.batch "migrate" is invalid`. Only a message that names
		// nothing, beside no resource result that does, stands for any hook.
		named := false
		for _, m := range invalidObjectRe.FindAllStringSubmatch(op.Message, -1) {
			out[hookRef{Group: m[2], Kind: m[1], Name: m[3]}] = op.Message
			named = true
		}
		if !named && len(out) == 0 {
			out[hookRef{}] = op.Message
		}
	}
	return out
}

// deletesBeforeCreation reports whether a hook's delete policy has Argo CD delete the old object before creating the
// new one: BeforeHookCreation (Helm's before-hook-creation), or no policy at all (Argo CD's default).
func deletesBeforeCreation(h *unstructured.Unstructured) bool {
	a := h.GetAnnotations()
	p, ok := a["argocd.argoproj.io/hook-delete-policy"]
	if !ok {
		hp, hok := a["helm.sh/hook-delete-policy"]
		if !hok {
			return true
		}
		return strings.Contains(hp, "before-hook-creation")
	}
	return strings.Contains(p, "BeforeHookCreation")
}

// invalidObjectRe matches how the apiserver names an invalid object: `Job.batch "migrate" is invalid`, `ConfigMap
// "x" is invalid` (kind, group, name).
var invalidObjectRe = regexp.MustCompile(`\b([A-Z][A-Za-z0-9]*)(?:\.([a-z0-9.-]+))? "([^"]+)" is invalid`)

func appName(obs AppObservation) string {
	if obs.App.Namespace != "" {
		return obs.App.Namespace + "/" + obs.App.Name
	}
	return obs.App.Name
}

// cliAppName is how the argocd CLI names the app: "namespace/name" when the app lives outside the control plane
// namespace is accepted everywhere, so always qualify when the namespace is known.
func cliAppName(obs AppObservation) string { return appName(obs) }

func appObjectRef(obs AppObservation) syncmedic.ObjectRef {
	a := obs.App
	return syncmedic.ObjectRef{
		Tool: syncmedic.ToolArgoCD, Instance: obs.Instance, Group: "argoproj.io", Version: "v1alpha1", Kind: "Application",
		Namespace: a.Namespace, Name: a.Name, UID: string(a.UID), App: a.Name, AppNamespace: a.Namespace, Project: a.Spec.Project,
		Labels: a.Labels, SlackChannel: strings.TrimSpace(a.Annotations[syncmedic.SlackChannelAnnotation]),
	}
}

func hookObjectRef(obs AppObservation, h *unstructured.Unstructured) syncmedic.ObjectRef {
	gvk := h.GroupVersionKind()
	o := appObjectRef(obs)
	o.Group, o.Version, o.Kind, o.Namespace, o.Name, o.UID = gvk.Group, gvk.Version, gvk.Kind, h.GetNamespace(), h.GetName(), string(h.GetUID())
	return o
}

func appLinks(obs AppObservation) []syncmedic.Link {
	if obs.UIURL == "" {
		return nil
	}
	u := strings.TrimRight(obs.UIURL, "/") + "/applications/" + url.PathEscape(obs.App.Namespace) + "/" + url.PathEscape(obs.App.Name)
	return []syncmedic.Link{{Title: "Argo CD: " + appName(obs), URL: u}}
}
