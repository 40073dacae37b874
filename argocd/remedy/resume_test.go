package remedy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// terminatedApp is the stuck application as syncmedic's TerminateOperation left it: the same operation, ended
// Failed "Operation terminated" (gitops-engine sync_context.go), .operation cleared, OutOfSync.
//
// hand-written state: a unit fixture in memory; the real controller's terminate is exercised in resync_e2e_test.go.
func terminatedApp() *v1alpha1.Application {
	a := stuckApp()
	a.Status.OperationState.Phase, a.Status.OperationState.Message = synccommon.OperationFailed, terminatedMessage
	a.Status.OperationState.FinishedAt = &metav1.Time{Time: now}
	a.Operation = nil
	a.Status.Sync.Status = v1alpha1.SyncStatusCodeOutOfSync
	return a
}

// TestResumeSyncsOnlyWhatTheTerminateLeft: the decision table of the next leader that finds terminate-and-resync cut
// off after its TerminateOperation ("sync" pending): it syncs once, only when the terminated operation is still the
// latest, ended by that terminate, with nothing newer requested and the application not already synced; otherwise it
// writes nothing and says why.
//
// hand-written state: each row varies terminatedApp's in-memory operation state (a pure decision table, no
// apiserver); the real v2.14.21 controller's side of the resume is proven by internal/conformance/argo
// TestARemedyCutOffAfterItsTerminateIsFinishedOnceByTheNextServe.
func TestResumeSyncsOnlyWhatTheTerminateLeft(t *testing.T) {
	f := stuckFinding(stuckApp())
	// succeeded is terminatedApp whose operation (started at startedAt) ended Succeeded instead.
	succeeded := func(startedAt metav1.Time) *v1alpha1.Application {
		a := terminatedApp()
		a.Status.OperationState.StartedAt = startedAt
		a.Status.OperationState.Phase, a.Status.OperationState.Message = synccommon.OperationSucceeded, "successfully synced (all tasks run)"
		return a
	}
	tests := []struct {
		name   string
		app    func() *v1alpha1.Application
		synced int
		step   string
	}{
		{name: "terminated by syncmedic, nothing since: synced once with the operation's revision", app: terminatedApp, synced: 1,
			step: `app=argocd/shop: the operation started at 2026-03-10T11:00:00Z is still the latest and ended "Operation terminated" by syncmedic's terminate; resuming the pending sync`},
		{name: "someone requested a sync since: not synced again", app: func() *v1alpha1.Application {
			a := terminatedApp()
			a.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{}}
			return a
		}, step: "app=argocd/shop: someone else synced it since syncmedic terminated the operation started at 2026-03-10T11:00:00Z (operation started at 2026-03-10T11:00:00Z, phase Failed): not syncing again"},
		{name: "a newer operation ran since: not synced again", app: func() *v1alpha1.Application { return succeeded(metav1.NewTime(now)) }, step: "app=argocd/shop: someone else synced it since syncmedic terminated the operation started at 2026-03-10T11:00:00Z (operation started at 2026-03-10T12:00:00Z, phase Succeeded): not syncing again"},
		{name: "the operation ended Succeeded before the terminate reached it: not synced", app: func() *v1alpha1.Application { return succeeded(terminatedApp().Status.OperationState.StartedAt) }, step: "app=argocd/shop: the operation started at 2026-03-10T11:00:00Z ended by itself (phase Succeeded: successfully synced (all tasks run)), not by syncmedic's terminate: not syncing again"},
		{name: "the operation failed by itself (a hook failed): not synced", app: func() *v1alpha1.Application {
			a := terminatedApp()
			a.Status.OperationState.Message = "one or more synchronization tasks completed unsuccessfully"
			return a
		}, step: "app=argocd/shop: the operation started at 2026-03-10T11:00:00Z ended by itself (phase Failed: one or more synchronization tasks completed unsuccessfully), not by syncmedic's terminate: not syncing again"},
		{name: "already synced to the operation's revision: not synced", app: func() *v1alpha1.Application {
			a := terminatedApp()
			a.Status.Sync.Status, a.Status.Sync.Revision = v1alpha1.SyncStatusCodeSynced, "4f2c1e9"
			return a
		}, step: "app=argocd/shop is already synced to 4f2c1e9, the revision the terminated operation was deploying: not syncing again"},
		{name: "no operation state any more: not synced", app: func() *v1alpha1.Application {
			a := terminatedApp()
			a.Status.OperationState = nil
			return a
		}, step: "app=argocd/shop has no operation state any more: not resuming the sync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeRemedyArgo{app: tt.app(), version: "v2.14.21+7ed2f2b"}
			out, err := newTestRemedies(t, fake).ResumeResync(context.Background(), f, PendingSync)
			require.NoError(t, err, "steps: %v", out.Steps)
			require.Equal(t, tt.step, out.Steps[0])
			require.Len(t, fake.syncs, tt.synced)
			require.Zero(t, fake.terminated, "never terminated again")
			require.Equal(t, tt.synced == 1, out.Changed)
			if tt.synced == 1 {
				require.Equal(t, "4f2c1e9", fake.syncs[0].GetRevision())
				require.Equal(t, []string{tt.step, "Sync app=argocd/shop revision=4f2c1e9 syncOptions=CreateNamespace=true"}, out.Steps)
			} else {
				require.Len(t, out.Steps, 1)
			}
		})
	}
	t.Run("the policy refuses the pending sync now: nothing sent, the error says the app was left terminated", func(t *testing.T) {
		fake := &fakeRemedyArgo{app: terminatedApp(), version: "v2.14.21+7ed2f2b"}
		ctx := syncmedic.WithWriteGate(context.Background(), func(context.Context, string) string {
			return "the kill switch is on: syncmedic takes no action (dry-run)"
		})
		_, err := newTestRemedies(t, fake).ResumeResync(ctx, f, PendingSync)
		require.EqualError(t, err, "app=argocd/shop was left terminated by syncmedic, and the pending sync was not sent: Sync app=argocd/shop revision=4f2c1e9 syncOptions=CreateNamespace=true, "+
			"refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run); check it and sync it by hand (argocd app sync argocd/shop)")
		require.True(t, syncmedic.IsPermanent(err))
		require.Empty(t, fake.syncs)
	})
}

// TestResyncRecordsItsCheckpointAfterTheTerminate: terminate-and-resync saves "sync pending" once its
// TerminateOperation was accepted and before it waits and syncs, so a next leader can finish it.
func TestResyncRecordsItsCheckpointAfterTheTerminate(t *testing.T) {
	a := stuckApp()
	fake := &fakeRemedyArgo{app: a, version: "v2.14.21+7ed2f2b"}
	type checkpoint struct {
		steps   []string
		pending string
		calls   []string
	}
	var got []checkpoint
	ctx := syncmedic.WithCheckpoint(context.Background(), func(_ context.Context, steps []string, pending string) error {
		got = append(got, checkpoint{steps: steps, pending: pending, calls: append([]string(nil), fake.calls...)})
		return nil
	})
	out, err := newTestRemedies(t, fake).TerminateAndResync(ctx, stuckFinding(a), false)
	require.NoError(t, err, "steps: %v", out.Steps)
	require.Len(t, got, 1)
	require.Equal(t, PendingSync, got[0].pending)
	require.Equal(t, []string{"TerminateOperation app=argocd/shop"}, got[0].steps)
	require.Equal(t, "TerminateOperation", got[0].calls[len(got[0].calls)-1], "saved right after the terminate, before the wait and the sync")
	require.Len(t, fake.syncs, 1)
}
