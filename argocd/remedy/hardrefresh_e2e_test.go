package remedy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestHardRefreshThroughTheAPI: the hard-refresh remedy is ApplicationService.Get with refresh=hard, which needs only
// `applications, get` (server/application Get enforces ActionGet). This in-process argocd-server runs no
// application-controller, so only what needs none is checked here: a dry run makes no call, and an account without
// the permission is refused cleanly. What the request does on the real controllers (argocd-server writes the hard
// refresh annotation, the controller consumes it and compares at once, the call returns after that) is
// internal/conformance/argo TestHardRefreshOnTheRealController.
func TestHardRefreshThroughTheAPI(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind"},
		Policy:   []string{"p, role:blind, projects, get, *, allow", "g, blind, role:blind"},
	})
	const appName = "refreshed"
	argo.CreateApplication(t, argo.NewApplication(appName, env.Namespace(t)))
	f := syncmedic.Finding{Rule: syncmedic.RuleOperationStuck, Fingerprint: "hard-refresh-e2e",
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Kind: "Application", Name: appName, App: appName, AppNamespace: argo.Namespace, Project: "default"},
		Remedy: syncmedic.Remedy{Action: syncmedic.ActionHardRefresh, AutoSafe: true}}
	remediate := func(c argocd.Client, dryRun bool) (syncmedic.Outcome, error) {
		r, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c})
		require.NoError(t, err)
		return r.Remediers()[syncmedic.ActionHardRefresh].Remediate(context.Background(), f, dryRun)
	}
	before := snapshotObjects(t, argo, appName, "", "")

	t.Run("dry-run makes no call, changes nothing and says what it would do", func(t *testing.T) {
		// Connected through a proxy that is then shut: any API call would fail.
		proxy := testenv.NewProxy(t, argo.Addr)
		c := dial(t, proxy.Addr(), argo.AdminToken(t))
		proxy.Down()
		out, err := remediate(c, true)
		require.NoError(t, err)
		require.True(t, out.DryRun)
		require.False(t, out.Changed)
		require.Equal(t, []string{"Get app=" + argo.Namespace + "/" + appName + " refresh=hard"}, out.Steps)
		require.Equal(t, before, snapshotObjects(t, argo, appName, "", ""), "the Application is byte-for-byte unchanged: no refresh was requested")
	})

	t.Run("an account without applications, get is refused cleanly and nothing changes", func(t *testing.T) {
		_, err := remediate(dial(t, argo.Addr, argo.Token(t, "blind")), false)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err), "a permission error must not be retried: %v", err)
		require.ErrorContains(t, err, "permission denied")
		require.ErrorContains(t, err, "applications, get")
		require.Equal(t, before, snapshotObjects(t, argo, appName, "", ""), "no refresh was requested")
	})
}
