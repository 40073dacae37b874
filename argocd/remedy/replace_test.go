package remedy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// withSettings is the fake with a SettingsService answering syncWithReplaceAllowed.
type withSettings struct {
	*fakeRemedyArgo
	replaceAllowed bool
}

func (f withSettings) SyncWithReplaceAllowed(context.Context) (bool, error) {
	f.record("SettingsService.Get")
	return f.replaceAllowed, nil
}

func TestResyncCarryingReplaceChecksTheServerAllowsIt(t *testing.T) {
	tests := []struct {
		name           string
		version        string
		options        []string
		replaceAllowed bool
		refusal        string // "" when the remedy terminates and syncs
		asks           bool
	}{
		{name: "v3.6.1 refusing replace: nothing terminated, a permanent refusal naming the setting", version: "v3.6.1+abc",
			options: []string{"Replace=true"}, asks: true,
			refusal: "argocd-server's settings say it does not allow it (syncWithReplaceAllowed is false)"},
		{name: "v3.6.1 allowing replace: terminated and synced", version: "v3.6.1+abc", options: []string{"Replace=true"}, replaceAllowed: true, asks: true},
		{name: "v3.0.12 does not publish the setting: proposed only", version: "v3.0.12+abc", options: []string{"Replace=true"},
			refusal: "this server (before v3.1) does not publish whether it allows it"},
		{name: "v2.14.21 has no such setting", version: "v2.14.21+abc", options: []string{"Replace=true"}},
		{name: "without Replace=true the setting is not asked", version: "v3.6.1+abc", options: []string{"CreateNamespace=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			a.Status.OperationState.Operation.Sync.SyncOptions = tt.options
			a.Spec.Source = &v1alpha1.ApplicationSource{TargetRevision: "4f2c1e9"} // no override needed on v3.2+
			finding := stuckFinding(a)
			fake := &fakeRemedyArgo{app: a, version: tt.version}
			out, err := newTestRemedies(t, withSettings{fakeRemedyArgo: fake, replaceAllowed: tt.replaceAllowed}).TerminateAndResync(context.Background(), finding, false)
			require.Equal(t, tt.asks, contains(fake.calls, "SettingsService.Get"), "calls: %v", fake.calls)
			if tt.refusal == "" {
				require.NoError(t, err, "steps: %v", out.Steps)
				require.Equal(t, 1, fake.terminated)
				require.Len(t, fake.syncs, 1)
				require.Equal(t, tt.options, fake.syncs[0].SyncOptions.Items, "the same options")
				return
			}
			require.Error(t, err)
			require.True(t, syncmedic.IsPermanent(err), "reported once, not retried: %v", err)
			require.ErrorContains(t, err, tt.refusal)
			require.ErrorContains(t, err, `server.sync.replace.allowed is "false" in argocd-cmd-params-cm`)
			require.ErrorContains(t, err, "argocd app terminate-op shop, then argocd app sync shop")
			require.Equal(t, []string{"app=argocd/shop: the new sync carries " + synccommon.SyncOptionReplace + " and " + tt.refusal + ": not terminating"}, out.Steps)
			require.Zero(t, fake.terminated, "nothing terminated")
			require.Empty(t, fake.syncs)
			require.False(t, out.Changed)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestResyncOfAnOperationASyncCannotRepeatIsProposedOnly(t *testing.T) {
	spec := &v1alpha1.ApplicationSource{RepoURL: "https://git.example.com/shop.git", Path: "deploy", TargetRevision: "main"}
	tests := []struct {
		name    string
		sync    func(*v1alpha1.SyncOperation)
		refusal string
	}{
		{"a rollback to a source the spec no longer has", func(so *v1alpha1.SyncOperation) {
			so.Source = &v1alpha1.ApplicationSource{RepoURL: spec.RepoURL, Path: "deploy-v1", TargetRevision: "main"}
		}, `a sync of another source than the application's spec (a rollback: repoURL https://git.example.com/shop.git, path "deploy-v1", targetRevision "main", revision 4f2c1e9)`},
		{"a local sync", func(so *v1alpha1.SyncOperation) { so.Manifests = []string{"{}", "{}"} },
			"a local sync (2 manifests sent with the operation, argocd app sync --local)"},
		{"a sync recording today's source is repeated", func(so *v1alpha1.SyncOperation) { so.Source = spec.DeepCopy() }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			a.Spec.Source = spec.DeepCopy()
			tt.sync(a.Status.OperationState.Operation.Sync)
			fake := &fakeRemedyArgo{app: a, version: "v2.14.21+abc"}
			out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), stuckFinding(a), false)
			if tt.refusal == "" {
				require.NoError(t, err, "steps: %v", out.Steps)
				require.Len(t, fake.syncs, 1)
				return
			}
			require.Error(t, err)
			require.True(t, syncmedic.IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, "the stuck operation is "+tt.refusal+"; a new Sync deploys the application's spec as it is today")
			require.ErrorContains(t, err, "By hand: argocd app terminate-op shop, then ")
			require.Equal(t, []string{"app=argocd/shop: the stuck operation is " + tt.refusal + ", which a new Sync cannot repeat: not terminating"}, out.Steps)
			require.Zero(t, fake.terminated)
			require.Empty(t, fake.syncs)
		})
	}
}
