package remedy

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

// gateRecorder is the remediation stage's WriteGate as the remedies see it: it records each write it is asked about
// with the number of Argo CD calls made before it (so a test sees that no read comes between the gate and its
// write), and refuses from the refuseFrom-th write on (1-based; 0: never).
type gateRecorder struct {
	mu         sync.Mutex
	fake       *fakeRemedyArgo
	refuseFrom int
	asked      []string
	callsAt    []int
}

func (g *gateRecorder) gate(_ context.Context, write string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, write)
	g.fake.mu.Lock()
	g.callsAt = append(g.callsAt, len(g.fake.calls))
	g.fake.mu.Unlock()
	if g.refuseFrom > 0 && len(g.asked) >= g.refuseFrom {
		return "the kill switch is on: syncmedic takes no action (dry-run)"
	}
	return ""
}

// TestEveryWriteAsksTheGateRightBeforeItIsSent: the remedies read the application, its sync windows, permissions
// and settings before they write; the policy is read again (the stage's WriteGate) after all of them, immediately
// before each write. A refusal sends nothing; a refusal of the Sync after the operation was terminated says the
// application is left terminated and how to sync it.
func TestEveryWriteAsksTheGateRightBeforeItIsSent(t *testing.T) {
	const terminate, sync = "TerminateOperation app=argocd/shop", "Sync app=argocd/shop revision=4f2c1e9 syncOptions=CreateNamespace=true"
	tests := []struct {
		name       string
		refuseFrom int
		wantAsked  []string
		terminated int
		synced     int
		changed    bool
		wantErr    string
	}{
		{name: "the kill switch turned on during the remedy's reads: nothing is terminated", refuseFrom: 1,
			wantAsked: []string{terminate},
			wantErr:   "not sent: " + terminate + ", refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run)"},
		{name: "the kill switch turned on after the terminate: the Sync is not sent, and the error says what is left", refuseFrom: 2,
			wantAsked: []string{terminate, sync}, terminated: 1, changed: true,
			wantErr: "app=argocd/shop: syncmedic terminated its operation started at 2026-03-10T11:00:00Z, but the new sync was not sent: " + sync +
				", refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run); the application stays off that sync until someone syncs it: " +
				"check it and sync it by hand (argocd app sync argocd/shop)"},
		{name: "near miss: the policy still allows it: terminated and synced once, each write asked once", wantAsked: []string{terminate, sync},
			terminated: 1, synced: 1, changed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			fake := &fakeRemedyArgo{app: a, version: "v2.14.21+7ed2f2b"}
			g := &gateRecorder{fake: fake, refuseFrom: tt.refuseFrom}
			ctx := syncmedic.WithWriteGate(context.Background(), g.gate)
			out, err := newTestRemedies(t, fake).TerminateAndResync(ctx, stuckFinding(a), false)
			require.Equal(t, tt.wantAsked, g.asked)
			require.Equal(t, tt.terminated, fake.terminated)
			require.Len(t, fake.syncs, tt.synced)
			require.Equal(t, tt.changed, out.Changed)
			for i, w := range g.asked {
				// The call right after the gate is the write it was asked about: no read in between.
				next := fake.calls[g.callsAt[i]:]
				if tt.refuseFrom > 0 && i+1 >= tt.refuseFrom {
					require.Empty(t, next, "nothing after a refusal")
					continue
				}
				require.NotEmpty(t, next)
				require.Equal(t, w[:len(next[0])], next[0], "the write follows its gate directly")
			}
			if tt.wantErr == "" {
				require.NoError(t, err, "steps: %v", out.Steps)
				return
			}
			require.EqualError(t, err, tt.wantErr)
			require.True(t, syncmedic.IsPermanent(err))
			refusal, ok := syncmedic.IsWriteRefused(err)
			require.True(t, ok)
			require.Equal(t, tt.wantAsked[len(tt.wantAsked)-1], refusal.Write)
		})
	}
}

// TestPatchesAndRefreshesAskTheGate: the other Argo CD writes (PatchResource of a hook's finalizer, a Workflow's
// forceFinalizerRemoval, a hard refresh) are not sent when the gate refuses them.
func TestPatchesAndRefreshesAskTheGate(t *testing.T) {
	refuse := func(context.Context, string) string {
		return "the kill switch is on: syncmedic takes no action (dry-run)"
	}
	ctx := syncmedic.WithWriteGate(context.Background(), refuse)
	t.Run("remove-hook-finalizer", func(t *testing.T) {
		a := stuckApp()
		fake := &fakeRemedyArgo{app: a, version: "v3.6.1", live: hookManifest("11111111-aaaa")}
		out, err := newTestRemedies(t, fake).RemoveHookFinalizer(ctx, finalizerRemedyFinding(a, "11111111-aaaa", 1), false)
		_, refused := syncmedic.IsWriteRefused(err)
		require.True(t, refused, "%v", err)
		require.False(t, out.Changed)
		require.Empty(t, fake.patches)
		require.NotContains(t, fake.calls, "PatchResource")
	})
	t.Run("hard-refresh", func(t *testing.T) {
		a := stuckApp()
		fake := &fakeRemedyArgo{app: a, version: "v3.6.1"}
		out, err := newTestRemedies(t, fake).HardRefresh(ctx, stuckFinding(a), false)
		require.EqualError(t, err, "not sent: Get app=argocd/shop refresh=hard, refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run)")
		require.False(t, out.Changed)
		require.False(t, slices.Contains(fake.calls, "Get"), "the refresh (a Get with refresh=hard) was not sent")
	})
}
