package rules

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// LiveNeed says whether the rules need an application's live hook objects, judged from the application alone.
// Healthy applications never need them, so they cost no API call beyond the watch.
type LiveNeed int

// The live needs.
const (
	// LiveNone: the rules need no live hook object.
	LiveNone LiveNeed = iota
	// LiveNow: the operation is Running/Terminating, or Failed with "field is immutable", or a hook was seen with the
	// finalizer: fetch on every change, on every threshold and every resync interval.
	LiveNow
	// LiveOnce: the last operation ran hooks and finished more than the hook-finalizer threshold ago; one look per
	// operation tells whether a hook kept argocd.argoproj.io/hook-finalizer (v2.14.3 orphan, v3 leak). The Watcher
	// takes it only where its HookLeakCheck applies (by default: servers that can leak the finalizer).
	LiveOnce
)

// NeedsLive classifies an application; finalizerSeen is true when its last fetched hooks carried the finalizer.
func NeedsLive(app *v1alpha1.Application, finalizerSeen bool, now time.Time, th Thresholds) LiveNeed {
	if finalizerSeen {
		return LiveNow
	}
	op := app.Status.OperationState
	if op == nil {
		return LiveNone
	}
	switch op.Phase {
	case synccommon.OperationRunning, synccommon.OperationTerminating:
		return LiveNow
	case synccommon.OperationFailed, synccommon.OperationError:
		if len(immutableMessages(op)) > 0 {
			return LiveNow
		}
	}
	if !ranHooks(op) {
		return LiveNone
	}
	if at := orphanCheckAt(op, th); !at.IsZero() && !now.Before(at) {
		return LiveOnce
	}
	return LiveNone
}

// ranHooks reports whether the operation's sync result lists hooks.
func ranHooks(op *v1alpha1.OperationState) bool {
	if op == nil || op.SyncResult == nil {
		return false
	}
	for _, r := range op.SyncResult.Resources {
		if r.HookType != "" {
			return true
		}
	}
	return false
}

// orphanCheckAt is when a finished operation's hooks are worth one look for a leftover finalizer.
func orphanCheckAt(op *v1alpha1.OperationState, th Thresholds) time.Time {
	if op == nil || op.FinishedAt == nil || !ranHooks(op) {
		return time.Time{}
	}
	return op.FinishedAt.Add(th.HookFinalizer)
}

// OperationSignature is what the watcher compares to tell an operation's progress: a change of it restarts the
// thresholds counted from the last change. It changes whenever the operation state changes in a way a person would
// call progress: phase, message, start, and each hook's phase.
func OperationSignature(op *v1alpha1.OperationState) string {
	if op == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(string(op.Phase) + "|" + op.StartedAt.UTC().Format(time.RFC3339) + "|" + op.Message)
	// A retry's start is progress: v2.14.21 starts the next attempt by writing finishedAt: null with the failed
	// attempt's result still in place (controller/appcontroller.go ~1408-1413), then runs the sync; without these the
	// hook of the failed wave would look lost since the attempt before, and the retry would be terminated.
	b.WriteString("|" + strconv.FormatInt(op.RetryCount, 10))
	if op.FinishedAt != nil {
		b.WriteString("|finished " + op.FinishedAt.UTC().Format(time.RFC3339))
	}
	if op.SyncResult != nil {
		for _, r := range op.SyncResult.Resources {
			b.WriteString("|" + r.Kind + "/" + r.Name + "=" + string(r.HookPhase) + "," + string(r.Status))
		}
	}
	return b.String()
}

// NextDeadline returns the earliest instant after now at which a rule's verdict on obs can change by the passing of
// time alone (a threshold crossed), or zero when none can.
//
// A silence that ends with time counts too: an operation waiting for its retry backoff is on schedule until the
// retry is due, so argocd/operation-stuck's deadline is the retry's due time plus its threshold (stuckSince) — a
// retry that never starts writes nothing, and no event would wake serve. An operation a sync window blocks needs no
// such deadline: the observation holds no window end, operation-stuck counts from its last change (it reports the
// block), and the hook rules' silence ends when the controller resumes the operation, which changes its state.
func NextDeadline(obs AppObservation, now time.Time, th Thresholds) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	op := obs.App.Status.OperationState
	running := op != nil && (op.Phase == synccommon.OperationRunning || op.Phase == synccommon.OperationTerminating)
	lastChange := time.Time{}
	if running {
		lastChange = op.StartedAt.Time
		if obs.StateSince.After(lastChange) {
			lastChange = obs.StateSince
		}
		if op.Phase == synccommon.OperationRunning {
			consider(lastChange.Add(th.HookCompletion)) // a waited-on hook not found
			consider(lastChange.Add(th.HookDeletion))   // an old hook never deleted
			if how, _, ok := parseWaiting(op.Message); ok && how == waitHealthy {
				consider(lastChange.Add(th.WaitingForHealth)) // a resource never healthy
			}
		}
		consider(stuckSince(obs, op).Add(th.OperationStuck))
		for _, r := range obs.Reconciled {
			consider(r.Add(OperationPassBound)) // a reconciliation becomes the sign the controller looked
		}
		if r := obs.App.Status.ReconciledAt; r != nil {
			consider(r.Add(OperationPassBound))
			consider(r.Add(th.ControllerNotProcessing)) // a controller that stopped reconciling the app
		}
		if Orphaned(obs.App) {
			consider(lastChange.Add(th.OperationOrphaned)) // an operation state nothing will finish
		}
	}
	consider(orphanCheckAt(op, th))
	if op != nil && op.FinishedAt != nil && !running {
		consider(op.FinishedAt.Add(th.AutoSyncNotRetried)) // a failed automated sync never retried
	}
	if dt := obs.App.DeletionTimestamp; dt != nil {
		consider(dt.Add(th.AppDeletion))
	}
	for _, h := range obs.Hooks {
		if running {
			if done, _, at := hookFinishedAt(h); done && at.After(lastChange) {
				consider(at.Add(th.HookCompletion)) // a waited-on hook that finished
			}
		}
		if FinalizerIndex(h, HookFinalizer) < 0 {
			continue
		}
		if dt := h.GetDeletionTimestamp(); dt != nil {
			since := dt.Time
			if running && lastChange.After(since) {
				since = lastChange
			}
			consider(since.Add(th.HookFinalizer))
		} else if !running {
			since := h.GetCreationTimestamp().Time
			if op != nil && op.FinishedAt != nil {
				since = op.FinishedAt.Time
			}
			consider(since.Add(th.HookFinalizer))
		}
	}
	return next
}

// HasHookFinalizer reports whether any hook carries argocd.argoproj.io/hook-finalizer.
func HasHookFinalizer(hooks []*unstructured.Unstructured) bool {
	for _, h := range hooks {
		if FinalizerIndex(h, HookFinalizer) >= 0 {
			return true
		}
	}
	return false
}

// HookCandidates picks the tree nodes worth a GetResource.
func HookCandidates(app *v1alpha1.Application, tree *v1alpha1.ApplicationTree) []v1alpha1.ResourceNode {
	named := map[hookRef]bool{}
	if op := app.Status.OperationState; op != nil {
		if op.SyncResult != nil {
			for _, r := range op.SyncResult.Resources {
				if r.HookType != "" || strings.Contains(r.Message, "field is immutable") {
					named[hookRef{Group: r.Group, Kind: r.Kind, Name: r.Name}] = true
				}
			}
		}
		if _, ref, ok := parseWaiting(op.Message); ok {
			named[ref] = true
		}
	}
	managed := map[hookRef]bool{}
	for _, r := range app.Status.Resources {
		if r.Hook {
			named[hookRef{Group: r.Group, Kind: r.Kind, Name: r.Name}] = true
		} else {
			managed[hookRef{Group: r.Group, Kind: r.Kind, Name: r.Name}] = true
		}
	}
	var out []v1alpha1.ResourceNode
	for _, n := range tree.Nodes {
		ref := hookRef{Group: n.Group, Kind: n.Kind, Name: n.Name}
		if named[ref] || (len(n.ParentRefs) == 0 && !managed[ref]) {
			out = append(out, n)
		}
	}
	return out
}
