package remedy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
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

func TestResyncOrphanedSyncsWithoutTerminating(t *testing.T) {
	finding := func(a *v1alpha1.Application) syncmedic.Finding {
		return rules.OperationOrphaned(rules.AppObservation{App: a}, now, rules.DefaultThresholds())[0]
	}
	t.Run("the orphaned state is replaced by a sync of the same revision and options; nothing is terminated", func(t *testing.T) {
		a := orphanedApp(time.Hour)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
		out, err := newTestRemedies(t, fake).ResyncOrphaned(context.Background(), finding(a), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.True(t, out.Changed)
		require.NotContains(t, fake.calls, "TerminateOperation")
		require.Len(t, fake.syncs, 1)
		require.Equal(t, "4f2c1e9", fake.syncs[0].GetRevision())
		require.Equal(t, []string{"CreateNamespace=true"}, fake.syncs[0].SyncOptions.Items)
	})
	t.Run("a sync window that denies an unattended sync: nothing is synced", func(t *testing.T) {
		a := orphanedApp(time.Hour)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21", windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
			ActiveWindows: []*application.ApplicationSyncWindow{window("deny", "0 22 * * *", true)}, AssignedWindows: []*application.ApplicationSyncWindow{window("deny", "0 22 * * *", true)}}}
		_, err := newTestRemedies(t, fake).ResyncOrphaned(context.Background(), finding(a), false)
		require.ErrorContains(t, err, "blocks unattended syncs now")
		require.Empty(t, fake.syncs)
	})
	t.Run("the state is no longer orphaned (the operation is back, or a new one started): nothing to do", func(t *testing.T) {
		a := orphanedApp(time.Hour)
		f := finding(a)
		a.Operation = &a.Status.OperationState.Operation
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
		out, err := newTestRemedies(t, fake).ResyncOrphaned(context.Background(), f, false)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Empty(t, fake.syncs)
	})
	t.Run("dry run: the plan names no terminate", func(t *testing.T) {
		a := orphanedApp(time.Hour)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
		out, err := newTestRemedies(t, fake).ResyncOrphaned(context.Background(), finding(a), true)
		require.NoError(t, err)
		require.Empty(t, fake.calls)
		require.Len(t, out.Steps, 3)
		for _, s := range out.Steps {
			require.NotContains(t, s, "TerminateOperation")
		}
	})
}
