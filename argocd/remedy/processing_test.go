package remedy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
)

// TestTerminateNeedsTheControllersReconciliationAfterTheEvidence: right before TerminateOperation the remedy reads
// the application again and refuses, permanently and without any write, when the application-controller has not
// reconciled it after the instant the finding's evidence dates from (the hook's finish).
func TestTerminateNeedsTheControllersReconciliationAfterTheEvidence(t *testing.T) {
	finished := now.Add(-6 * time.Minute)
	tests := []struct {
		name       string
		reconciled *time.Duration // nil: never reconciled
		refused    string         // "" when the remedy goes ahead
	}{
		{name: "last reconciled 8m ago, before the hook finished 6m ago: refused", reconciled: durPtr(8 * time.Minute),
			refused: "(" + finished.Format(time.RFC3339) + "; status.reconciledAt " + now.Add(-8*time.Minute).Format(time.RFC3339) + ")"},
		{name: "reconciled 1m ago, after the hook finished: terminated and synced again", reconciled: durPtr(time.Minute)},
	}
	terminators := map[string]func(r *Remedies, f syncmedic.Finding) (syncmedic.Outcome, error){
		"terminate-and-resync": func(r *Remedies, f syncmedic.Finding) (syncmedic.Outcome, error) {
			return r.TerminateAndResync(context.Background(), f, false)
		},
		"terminate-operation": func(r *Remedies, f syncmedic.Finding) (syncmedic.Outcome, error) {
			return r.TerminateOperation(context.Background(), f, false)
		},
	}
	for action, apply := range terminators {
		for _, tt := range tests {
			t.Run(action+": "+tt.name, func(t *testing.T) {
				a := stuckApp()
				if tt.reconciled != nil {
					a = reconciled(a, *tt.reconciled)
				}
				f := stuckFinding(a)
				f.Remedy.Params[rules.ParamEvidenceAt] = finished.Format(time.RFC3339)
				fake := &fakeRemedyArgo{app: a, version: "v2.14.21+7ed2f2b", windows: openWindows()}
				out, err := apply(newTestRemedies(t, fake), f)
				if tt.refused == "" {
					require.NoError(t, err, "steps: %v", out.Steps)
					require.Equal(t, 1, fake.terminated)
					return
				}
				require.Error(t, err)
				require.True(t, syncmedic.IsPermanent(err), "%v", err)
				require.ErrorContains(t, err, "argocd argocd/shop: not terminating its operation: Argo CD's application-controller has not reconciled the application since the evidence of the finding "+tt.refused)
				require.ErrorContains(t, err, "argocd-app-controller-shard-cm")
				require.Zero(t, fake.terminated, "nothing was terminated")
				require.Empty(t, fake.syncs, "nothing was synced")
				require.Empty(t, fake.patches)
				require.False(t, out.Changed)
			})
		}
	}
	t.Run("a finding without the evidence time (from before the parameter) is not checked", func(t *testing.T) {
		a := stuckApp()
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21+7ed2f2b", windows: openWindows()}
		out, err := newTestRemedies(t, fake).TerminateOperation(context.Background(), stuckFinding(a), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Equal(t, 1, fake.terminated)
	})
}

func durPtr(d time.Duration) *time.Duration { return &d }

// openWindows is a project with no sync window: every sync may run.
func openWindows() *application.ApplicationSyncWindowsResponse {
	return &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true)}
}
