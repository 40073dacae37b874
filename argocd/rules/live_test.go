package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

func TestNeedsLive(t *testing.T) {
	th := DefaultThresholds()
	succeededWithHooks := func(finished time.Duration) *v1alpha1.OperationState {
		op := runningOp(time.Hour, "successfully synced", synccommon.OperationSucceeded)
		op.Phase, op.FinishedAt = synccommon.OperationSucceeded, ago(finished)
		return op
	}
	tests := []struct {
		name          string
		op            *v1alpha1.OperationState
		finalizerSeen bool
		want          LiveNeed
	}{
		{"an application with no operation needs nothing", nil, false, LiveNone},
		{"a running operation needs the live hooks", runningOp(time.Minute, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning), false, LiveNow},
		{"a failed operation without field is immutable needs nothing", failedOp("one or more objects failed to apply"), false, LiveNone},
		{"a failed operation with field is immutable needs the live hooks", failedOp(`Job.batch "migrate" is invalid: field is immutable`), false, LiveNow},
		{"an operation that ran hooks and finished recently needs nothing yet", succeededWithHooks(time.Second), false, LiveNone},
		{"an operation that ran hooks and finished past the threshold needs one look", succeededWithHooks(time.Hour), false, LiveOnce},
		{"a hook seen with the finalizer keeps the application suspicious", nil, true, LiveNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, NeedsLive(app(tt.op), tt.finalizerSeen, now, th))
		})
	}
}

func TestNextDeadline(t *testing.T) {
	th := Thresholds{HookFinalizer: 2 * time.Second, HookCompletion: 5 * time.Second, OperationStuck: 30 * time.Second}
	t.Run("a running operation wakes up when the hook-completion threshold passes", func(t *testing.T) {
		obs := AppObservation{App: app(runningOp(time.Second, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning))}
		require.Equal(t, now.Add(4*time.Second), NextDeadline(obs, now, th))
	})
	t.Run("a deleted hook with the finalizer wakes up when its threshold passes", func(t *testing.T) {
		obs := AppObservation{App: app(runningOp(time.Minute, "waiting for deletion of batch/Job/migrate", "")),
			Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(time.Second), true)}}
		require.True(t, now.Add(time.Second).Equal(NextDeadline(obs, now, th)))
	})
	t.Run("the operation-stuck threshold counts from the last state change", func(t *testing.T) {
		obs := AppObservation{App: app(runningOp(time.Hour, "waiting for healthy state of apps/Deployment/web", "")), StateSince: now.Add(-10 * time.Second)}
		require.Equal(t, now.Add(20*time.Second), NextDeadline(obs, now, th))
	})
	t.Run("an application with nothing pending has no deadline", func(t *testing.T) {
		require.True(t, NextDeadline(AppObservation{App: app(nil)}, now, th).IsZero())
	})
}

// An operation the controller has set aside is silent until the pause ends; when it can end with time alone (a
// retry that falls due), serve must wake at its end plus the threshold, or a retry that never starts would only be
// seen on the next unrelated event (issue 26 item 6's follow-up).
func TestNextDeadlineAfterAPause(t *testing.T) {
	th := Thresholds{HookFinalizer: 2 * time.Second, HookCompletion: 5 * time.Second, OperationStuck: 30 * time.Second}
	tenMinutes := &v1alpha1.Backoff{Duration: "10m", MaxDuration: "10m"} // attempt #1 waits min(10m × 2¹, 10m)
	tests := []struct {
		name       string
		op         *v1alpha1.OperationState
		stateSince time.Time
		want       time.Time
	}{
		{
			name: "a retry due in 9 minutes wakes serve when it is due plus the operation-stuck threshold",
			op:   retryingOp(time.Minute, 1, tenMinutes, "one or more objects failed to apply. Retrying attempt #1 at 2026-03-10T12:04:00Z."),
			want: now.Add(9*time.Minute + 30*time.Second),
		},
		{
			name: "a retry due 5 seconds ago wakes serve 25 seconds from now",
			op:   retryingOp(10*time.Minute+5*time.Second, 1, tenMinutes, "one or more objects failed to apply. Retrying attempt #1 at 2026-03-10T11:55:00Z."),
			want: now.Add(25 * time.Second),
		},
		{
			name:       "a retry due before the last change seen counts from that change",
			op:         retryingOp(10*time.Minute+20*time.Second, 1, tenMinutes, "one or more objects failed to apply. Retrying attempt #1 at 2026-03-10T11:55:00Z."),
			stateSince: now.Add(-10 * time.Second),
			want:       now.Add(20 * time.Second),
		},
		{
			name:       "a retry whose backoff does not parse counts from its last change",
			op:         retryingOp(time.Minute, 1, &v1alpha1.Backoff{Duration: "soon"}, "one or more objects failed to apply. Retrying attempt #1"),
			stateSince: now.Add(-10 * time.Second),
			want:       now.Add(20 * time.Second),
		},
		{
			name: "an operation a sync window blocks counts from its last change: no window end is known",
			op:   runningOp(10*time.Second, SyncWindowBlockedMessage, synccommon.OperationRunning),
			want: now.Add(20 * time.Second),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := AppObservation{App: app(tt.op), StateSince: tt.stateSince}
			require.Equal(t, tt.want, NextDeadline(obs, now, th))
			fs := OperationStuck(obs, tt.want.Add(-time.Nanosecond), th)
			require.Empty(t, fs, "operation-stuck does not fire before the deadline")
			require.Len(t, OperationStuck(obs, tt.want, th), 1, "operation-stuck fires at the deadline")
		})
	}
}

func TestOperationSignature(t *testing.T) {
	a := runningOp(time.Minute, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning)
	b := runningOp(time.Minute, "waiting for completion of hook batch/Job/migrate", synccommon.OperationSucceeded)
	require.NotEqual(t, OperationSignature(a), OperationSignature(b), "a hook phase change is progress")
	require.Equal(t, OperationSignature(a), OperationSignature(runningOp(time.Minute, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning)))
	require.Empty(t, OperationSignature(nil))

	// v2.14.21 starts a retry by clearing finishedAt while the failed attempt's result still says Running
	// (controller/appcontroller.go ~1408-1413): that is progress, as is each new attempt's count.
	backoff := runningOp(time.Minute, "Retrying attempt #1 at 10:00:00", synccommon.OperationRunning)
	finished := metav1.NewTime(time.Now().Add(-75 * time.Second))
	backoff.FinishedAt, backoff.RetryCount = &finished, 1
	retrying := runningOp(time.Minute, "Retrying attempt #1 at 10:00:00", synccommon.OperationRunning)
	retrying.RetryCount = 1
	require.NotEqual(t, OperationSignature(backoff), OperationSignature(retrying), "a retry that starts is progress")
	again := *retrying
	again.RetryCount = 2
	require.NotEqual(t, OperationSignature(retrying), OperationSignature(&again), "a new attempt is progress")
}

func TestThresholdWarnings(t *testing.T) {
	t.Run("the default hook-completion threshold leaves the controller time to notice a finished hook", func(t *testing.T) {
		require.Empty(t, DefaultThresholds().Warnings())
	})
	t.Run("a threshold of a few seconds is called out: a remedy could abort a healthy sync", func(t *testing.T) {
		th := DefaultThresholds()
		th.HookCompletion = 5 * time.Second
		w := th.Warnings()
		require.Len(t, w, 1)
		require.Contains(t, w[0], "would then abort a healthy sync")
	})
}
