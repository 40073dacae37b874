package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
)

// TestHookCompletionMissedCountsTheWaitFromTheHooksEnd: the summary's "has waited", like the threshold, counts from
// when the hook finished (the Job's Complete condition, or its completionTime when the condition has no time), or from
// the operation's last change when that is later or the hook is not found — not from the operation's startedAt,
// which a retried operation keeps across its earlier attempts and their backoff (here: started 2h ago, retry #1).
func TestHookCompletionMissedCountsTheWaitFromTheHooksEnd(t *testing.T) {
	const waitingMsg = "waiting for completion of hook batch/Job/migrate"
	th := Thresholds{HookCompletion: 5 * time.Minute}
	retried := func() *AppObservation {
		op := runningOp(2*time.Hour, waitingMsg, synccommon.OperationRunning)
		op.RetryCount = 1
		return &AppObservation{App: reconciled(app(op), time.Minute), HooksKnown: true}
	}
	completeJob := func(t *testing.T, cond map[string]interface{}, completionTime string) *unstructured.Unstructured {
		j := hookJob(t, nil, nil, false)
		require.NoError(t, unstructured.SetNestedSlice(j.Object, []interface{}{cond}, "status", "conditions"))
		if completionTime != "" {
			require.NoError(t, unstructured.SetNestedField(j.Object, completionTime, "status", "completionTime"))
		}
		return j
	}
	at := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	tests := []struct {
		name    string
		obs     func(t *testing.T) AppObservation
		summary string // "" when nothing is reported
		since   time.Time
	}{
		{name: "a hook Job that completed 10m ago into a 2h-old retried operation: waited 10m, since it finished",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.Hooks = []*unstructured.Unstructured{completeJob(t, map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": at(10 * time.Minute)}, "")}
				return *o
			},
			summary: "Sync of argocd/shop has waited 10m for hook batch/Job/migrate since it finished", since: now.Add(-10 * time.Minute)},
		{name: "a hook Job that failed 10m ago counts the same",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.Hooks = []*unstructured.Unstructured{completeJob(t, map[string]interface{}{"type": "Failed", "status": "True", "lastTransitionTime": at(10 * time.Minute)}, "")}
				return *o
			},
			summary: "Sync of argocd/shop has waited 10m for hook batch/Job/migrate since it finished", since: now.Add(-10 * time.Minute)},
		{name: "a Complete condition without a time: the Job's completionTime is when it finished",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.Hooks = []*unstructured.Unstructured{completeJob(t, map[string]interface{}{"type": "Complete", "status": "True"}, at(10*time.Minute))}
				return *o
			},
			summary: "Sync of argocd/shop has waited 10m for hook batch/Job/migrate since it finished", since: now.Add(-10 * time.Minute)},
		{name: "the operation changed after the hook finished: waited since that change, and the hook's end said apart",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.StateSince = now.Add(-6 * time.Minute)
				o.Hooks = []*unstructured.Unstructured{completeJob(t, map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": at(10 * time.Minute)}, "")}
				return *o
			},
			summary: "Sync of argocd/shop has waited 6m for hook batch/Job/migrate, which finished 10m ago", since: now.Add(-6 * time.Minute)},
		{name: "a hook not found: waited since the operation's last change, not since it started",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.StateSince = now.Add(-20 * time.Minute)
				return *o
			},
			summary: "Sync of argocd/shop has waited 20m for hook batch/Job/migrate, which is not found", since: now.Add(-20 * time.Minute)},
		{name: "near miss: a hook Job that completed 4m ago into a 2h-old operation is under the 5m threshold",
			obs: func(t *testing.T) AppObservation {
				o := retried()
				o.Hooks = []*unstructured.Unstructured{completeJob(t, map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": at(4 * time.Minute)}, "")}
				return *o
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := tt.obs(t)
			require.NotNil(t, obs.App.Status.OperationState, "the rule looks at this operation")
			fs := HookCompletionMissed(obs, now, th)
			if tt.summary == "" {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			require.Equal(t, syncmedic.RuleHookCompletionMissed, fs[0].Rule)
			require.Equal(t, "migrate", fs[0].Object.Name)
			require.Equal(t, tt.summary, fs[0].Summary)
			require.Equal(t, tt.since, fs[0].Since)
		})
	}
}
