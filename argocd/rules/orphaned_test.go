package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// hand-written state: orphanedApp builds in memory the state argo-cd #17155 describes (status.operationState Running,
// .operation cleared) for the pure rule tests; internal/conformance/argo reaches it on the real v2.14.21 and v3.6.1
// controllers with the person's patch those issues describe.

// orphanedApp is app shop whose sync, started ago, waits for the health of its Deployment and whose .operation was
// cleared.
func orphanedApp(started time.Duration) *v1alpha1.Application {
	a := healthWaitApp(started, health.HealthStatusProgressing, "")
	a.Status.OperationState.Operation.InitiatedBy = v1alpha1.OperationInitiator{Username: "alice"}
	a.Operation = nil
	return a
}

func TestOperationOrphaned(t *testing.T) {
	th := DefaultThresholds()
	tests := []evalCase{
		{
			name: "an operation state Running with .operation cleared past the threshold is reported with the sync that clears it",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: orphanedApp(2 * time.Hour), StateSince: now.Add(-25 * time.Minute), UIURL: "https://cd.example.com"}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationOrphaned},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, `Operation state of argocd/shop has said Running for 25m with no operation behind it: Argo CD will never finish it, and terminating it answers "No operation is in progress"`, f.Summary)
				require.Equal(t, "Application", f.Object.Kind)
				require.Equal(t, now.Add(-25*time.Minute), f.Since)
				require.Equal(t, []string{"operationState.phase", "operationState.startedAt", "operationState.message", "revision", "operation", "unchanged for", "initiatedBy"}, fields(f))
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "operationState.message", Value: "waiting for healthy state of apps/Deployment/web"})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "operation", Value: "none (.operation is empty: the application controller no longer processes this operation)"})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "initiatedBy", Value: "alice"})
				require.Equal(t, syncmedic.ActionResyncOrphaned, f.Remedy.Action)
				require.True(t, f.Remedy.AutoSafe)
				require.True(t, f.Remedy.RerunsHooks, "a new sync runs every hook again")
				require.Equal(t, []string{"argocd app get argocd/shop", "argocd app sync argocd/shop --revision 4f2c1e9 --sync-option CreateNamespace=true"}, f.Remedy.Commands)
				require.Equal(t, now.Add(-2*time.Hour).UTC().Format(time.RFC3339), f.Remedy.Params[ParamOperationStartedAt])
			},
		},
		{
			name: "a Terminating state with .operation cleared is orphaned the same way",
			obs: func(t *testing.T) AppObservation {
				a := orphanedApp(time.Hour)
				a.Status.OperationState.Phase, a.Status.OperationState.Message = synccommon.OperationTerminating, "operation is terminating"
				return AppObservation{App: a}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationOrphaned},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, `Operation state of argocd/shop has said Terminating for 1h with no operation behind it: Argo CD will never finish it, and terminating it answers "No operation is in progress"`, fs[0].Summary)
			},
		},
		{
			name: "near miss: a running operation whose .operation is set is the controller's (waiting-for-health here)",
			obs: func(t *testing.T) AppObservation {
				a := orphanedApp(2 * time.Hour)
				a.Operation = &a.Status.OperationState.Operation
				return AppObservation{App: a}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWaitingForHealth},
		},
		{
			name: "near miss: .operation cleared within the threshold",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: orphanedApp(2 * time.Hour), StateSince: now.Add(-time.Minute)}
			},
		},
		{
			name: "near miss: a finished operation has no operation by design",
			obs: func(t *testing.T) AppObservation {
				a := orphanedApp(2 * time.Hour)
				a.Status.OperationState.Phase, a.Status.OperationState.FinishedAt = synccommon.OperationSucceeded, ago(time.Hour)
				return AppObservation{App: a}
			},
		},
		{
			name: "near miss: an application being deleted is argocd/app-deletion-stuck's",
			obs: func(t *testing.T) AppObservation {
				a := orphanedApp(time.Minute)
				a.DeletionTimestamp = ago(time.Minute)
				a.Finalizers = []string{"resources-finalizer.argocd.argoproj.io"}
				return AppObservation{App: a}
			},
		},
	}
	runEvalCases(t, th, tests)
}

// fields lists the evidence fields of f in order.
func fields(f syncmedic.Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		out = append(out, e.Field)
	}
	return out
}

func TestNextDeadlineWakesAnOrphanedOperationState(t *testing.T) {
	th := DefaultThresholds()
	th.HookCompletion, th.HookDeletion, th.OperationStuck, th.WaitingForHealth = time.Hour, time.Hour, 2*time.Hour, time.Hour
	obs := AppObservation{App: orphanedApp(3 * time.Hour), StateSince: now.Add(-time.Minute)}
	require.Equal(t, now.Add(-time.Minute+th.OperationOrphaned), NextDeadline(obs, now, th))
}
