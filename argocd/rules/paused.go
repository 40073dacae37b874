package rules

import (
	"strings"
	"time"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// SyncWindowBlockedMessage is the message the application-controller writes on a Running operation that a sync
// window blocks ("Sync operation blocked by sync window", followed by ": <error>" when the window itself is invalid):
// argo-cd v2.14.21 controller/sync.go:176-186, v3.0.12 controller/sync.go:171-181, v3.6.1 controller/sync.go:194-203.
// SyncAppState returns right after writing it, before gitops-engine runs, so while it stands nothing else of the
// operation state moves: a hook that finished meanwhile still shows Running.
const SyncWindowBlockedMessage = "Sync operation blocked by sync window"

// Pause says why the application-controller is not processing a Running operation now.
type Pause int

const (
	// NotPaused: the controller processes the operation on each of its passes.
	NotPaused Pause = iota
	// PausedBySyncWindow: a sync window denies the operation; the controller leaves it, unchanged, until the window
	// allows it.
	PausedBySyncWindow
	// PausedForRetry: an attempt failed and the controller waits for the retry backoff to run the next one. It keeps
	// the phase Running, sets finishedAt and keeps the failed attempt's sync result (argo-cd v2.14.21
	// controller/appcontroller.go:1393-1414 and 1469-1480; v3.6.1 controller/appcontroller.go:1677-1709 and
	// 1746-1759), so a hook of the failed wave can still show Running.
	PausedForRetry
)

// String names the pause for evidence lines.
func (p Pause) String() string {
	switch p {
	case PausedBySyncWindow:
		return "blocked by a sync window"
	case PausedForRetry:
		return "waiting to retry"
	}
	return "processing"
}

// OperationPause reports whether the application-controller has set op aside (see Pause); a nil operation or one
// that is not Running is NotPaused.
func OperationPause(op *v1alpha1.OperationState) Pause {
	if op == nil || op.Phase != synccommon.OperationRunning {
		return NotPaused
	}
	if strings.HasPrefix(op.Message, SyncWindowBlockedMessage) {
		return PausedBySyncWindow
	}
	if op.FinishedAt != nil {
		return PausedForRetry
	}
	return NotPaused
}

// RetryDue returns when the controller runs the next attempt of an operation waiting to retry: the time it checks
// itself, op.Operation.Retry.NextRetryAt(finishedAt, retryCount) (v2.14.21 appcontroller.go:1395, v3.6.1
// appcontroller.go:1679). The message's "Retrying attempt #N at T" was computed before retryCount was incremented and
// can be earlier than that. ok is false when op is not waiting to retry, or when its backoff does not parse (the
// controller fails such an operation on its next pass).
func RetryDue(op *v1alpha1.OperationState) (due time.Time, ok bool) {
	if OperationPause(op) != PausedForRetry {
		return time.Time{}, false
	}
	due, err := op.Operation.Retry.NextRetryAt(op.FinishedAt.Time, op.RetryCount)
	if err != nil {
		return time.Time{}, false
	}
	return due, true
}

// lookedSince reports whether the application-controller processed the application after t: the watcher saw the
// operation state change (phase, message or a sync result) after t, or the controller reconciled the application
// after t (reconciledSince). The second of margin covers t's truncation to whole seconds (metadata timestamps). A zero
// StateSince — a snapshot, or no change seen since the watcher started — is no sign by itself; a snapshot has
// status.reconciledAt.
func lookedSince(obs AppObservation, t, now time.Time) bool {
	return (!obs.StateSince.IsZero() && obs.StateSince.After(t.Add(time.Second))) || reconciledSince(obs, t, now)
}

// OperationPassBound is how long after the controller's first reconciliation following t the rules wait before
// they take it as the sign that the controller also processed the operation after t: v2.14.21 queues the operation
// pass right after each refresh (processAppRefreshQueueItem defers appOperationQueue.AddRateLimited), while v3.6.1
// polls an operation in progress at least every 30 s (appOperationMaxRequeueInterval) and on resource changes. Seen
// on v3.6.1: a controller continued after a stop reconciled the app at once and recorded the finished hook more than
// 5 s later, so a controller that just came back gets the time to record a hook that finished while it was away.
const OperationPassBound = 35 * time.Second

// reconciledSince reports whether the application-controller reconciled the application after t
// (status.reconciledAt, written by every comparison the refresh queue makes, whatever the operation does), and the
// first such reconciliation is at least OperationPassBound before now.
func reconciledSince(obs AppObservation, t, now time.Time) bool {
	first := firstReconciledAfter(obs, t)
	return !first.IsZero() && now.Sub(first) >= OperationPassBound
}

// firstReconciledAfter is the earliest reconciliation known after t (with a second of margin for timestamps
// truncated to seconds): the first of the reconciledAt values the watcher saw (AppObservation.Reconciled), else the
// application's status.reconciledAt — a snapshot's only one, the latest, which is no earlier than the first. Zero
// when the controller has not reconciled the app since t.
func firstReconciledAfter(obs AppObservation, t time.Time) time.Time {
	after := t.Add(time.Second)
	for _, r := range obs.Reconciled {
		if r.After(after) {
			return r
		}
	}
	if r := obs.App.Status.ReconciledAt; r != nil && r.Time.After(after) {
		return r.Time
	}
	return time.Time{}
}
