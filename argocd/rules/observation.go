package rules

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// AppObservation is everything the Argo CD rules need to know about one Application. Sources (the live watcher,
// the snapshot reader) fill it; rules only read it.
type AppObservation struct {
	// Instance names the Argo CD server the application was seen through ("" for the only one).
	Instance string
	// App is the Application as the Argo CD API (or `argocd app get -o json`) returns it.
	App *v1alpha1.Application
	// Hooks are the live hook objects of the application (annotation argocd.argoproj.io/hook or helm.sh/hook),
	// including ones that are being deleted, as the Argo CD API's GetResource or a kubectl dump returns them.
	Hooks []*unstructured.Unstructured
	// HooksKnown is true when the source looked for the application's hook objects, so that an absent hook is
	// really absent. When false, rules that need a hook's live state stay silent.
	HooksKnown bool
	// ServerVersion is the Argo CD server version (Version API, e.g. "v2.14.3+abc1234"), when known.
	ServerVersion string
	// StateSince is when the operation state last changed as observed by the source (phase, message or sync
	// result); zero means unknown, and rules fall back to the operation's startedAt.
	StateSince time.Time
	// UIURL is the base URL of the Argo CD UI, used for links ("" when not configured).
	UIURL string
	// Reconciled are the status.reconciledAt values the watcher saw, oldest first (at most MaxReconciled): the first
	// one after a hook finished is when the controller came back to the app. Empty for a snapshot.
	Reconciled []time.Time
}

// MaxReconciled bounds AppObservation.Reconciled; dropping the oldest only makes the first reconciliation after a
// time look later, never earlier.
const MaxReconciled = 32

// Thresholds are the ages after which an Argo CD condition counts as stuck.
type Thresholds struct {
	// HookFinalizer: a hook carrying argocd.argoproj.io/hook-finalizer with a deletionTimestamp older than this.
	HookFinalizer time.Duration
	// HookCompletion: an operation running longer than this while waiting on a hook that already finished.
	HookCompletion time.Duration
	// OperationStuck: an operation Running/Terminating with no change for longer than this.
	OperationStuck time.Duration
	// ControllerNotProcessing: an operation Running/Terminating while the application-controller has not reconciled
	// the application (status.reconciledAt) for longer than this (DefaultControllerNotProcessing).
	ControllerNotProcessing time.Duration
	// AppDeletion: an Application deleting, held by Argo CD's finalizers, for longer than this.
	AppDeletion time.Duration
	// HookDeletion: an operation waiting for the deletion of an old hook that is not being deleted (or that another
	// controller's finalizer holds) for longer than this.
	HookDeletion time.Duration
	// WaitingForHealth: an operation waiting for the healthy state of a resource that is not Healthy for longer
	// than this.
	WaitingForHealth time.Duration
	// AutoSyncNotRetried: a failed sync that automated sync will not retry, for longer than this after it finished.
	AutoSyncNotRetried time.Duration
	// OperationOrphaned: an operation state Running or Terminating with no operation behind it, unchanged for
	// longer than this.
	OperationOrphaned time.Duration
	// RollingSyncStalled: an ApplicationSet RollingSync entry Pending or Progressing, its application not Healthy and
	// Synced, for longer than this.
	RollingSyncStalled time.Duration
}

// MinSafeHookCompletion is the shortest hook-completion threshold that gives Argo CD's controller time to notice a
// finished hook: v3.6.1 was seen noticing one more than 5 s late, and a remedy then terminated a healthy sync.
const MinSafeHookCompletion = 30 * time.Second

// Warnings name thresholds that risk acting on healthy syncs.
func (th Thresholds) Warnings() []string {
	if th.HookCompletion < MinSafeHookCompletion {
		return []string{fmt.Sprintf("the hook-completion threshold %s is shorter than %s: Argo CD's controller can take longer than that to notice a finished hook, and terminate-and-resync would then abort a healthy sync", th.HookCompletion, MinSafeHookCompletion)}
	}
	return nil
}

// DefaultThresholds are the defaults the catalog documents.
func DefaultThresholds() Thresholds {
	return Thresholds{HookFinalizer: 2 * time.Minute, HookCompletion: 5 * time.Minute, OperationStuck: 30 * time.Minute,
		ControllerNotProcessing: DefaultControllerNotProcessing,
		AppDeletion:             5 * time.Minute, HookDeletion: 2 * time.Minute, WaitingForHealth: 10 * time.Minute, AutoSyncNotRetried: 5 * time.Minute,
		OperationOrphaned: 10 * time.Minute, RollingSyncStalled: 30 * time.Minute}
}

// Retained is the part of an application the watcher keeps between events: what the rules, the live-state reads
// and the remedies' parameters read (name, namespace, UID, resourceVersion, project, destination, sync policy,
// operation, operation state, the resource list, the sync status and SyncError conditions, and the labels and slack-channel annotation that route its
// incidents). History, summary, health status, sources, other annotations and managed fields are dropped, so the heap holds a fraction of each application. It trims a in
// place and returns it (a new 1 KB Application per event was a tenth of the watcher's allocations): a is the
// decoded event or List item, which nothing else holds.
func Retained(a *v1alpha1.Application) *v1alpha1.Application {
	var r v1alpha1.Application
	r.Name, r.Namespace, r.UID, r.ResourceVersion, r.Generation = a.Name, a.Namespace, a.UID, a.ResourceVersion, a.Generation
	r.Spec.Project, r.Spec.Destination, r.Spec.SyncPolicy = a.Spec.Project, a.Spec.Destination, a.Spec.SyncPolicy
	r.Labels = a.Labels // routing (policy.Route); the slack-channel annotation too, and no other annotation
	if ch, ok := a.Annotations[syncmedic.SlackChannelAnnotation]; ok {
		r.Annotations = map[string]string{syncmedic.SlackChannelAnnotation: ch}
	}
	r.Operation = a.Operation
	r.Status.OperationState, r.Status.Resources = a.Status.OperationState, a.Status.Resources
	// The controller's own sign that it processes the app (argocd/controller-not-processing, hook-completion-missed).
	r.Status.ReconciledAt, r.Status.ControllerNamespace = a.Status.ReconciledAt, a.Status.ControllerNamespace
	// What argocd/auto-sync-not-retried reads: the sync status, and the controller's SyncError saying it skips the
	// failed revision.
	r.Status.Sync.Status, r.Status.Sync.Revision, r.Status.Sync.Revisions = a.Status.Sync.Status, a.Status.Sync.Revision, a.Status.Sync.Revisions
	for _, c := range a.Status.Conditions {
		if c.Type == v1alpha1.ApplicationConditionSyncError {
			r.Status.Conditions = append(r.Status.Conditions, c)
		}
	}
	if a.DeletionTimestamp != nil { // only what argocd/app-deletion-stuck reads, and only while deleting
		r.DeletionTimestamp, r.Finalizers = a.DeletionTimestamp, a.Finalizers
		for _, c := range a.Status.Conditions {
			if c.Type == v1alpha1.ApplicationConditionDeletionError {
				r.Status.Conditions = append(r.Status.Conditions, c)
			}
		}
	}
	*a = r
	return a
}
