package argocd_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// thresholds are short so the tests measure detection in seconds.
var thresholds = rules.Thresholds{HookFinalizer: 2 * time.Second, HookCompletion: 2 * time.Second, OperationStuck: 2 * time.Second}

func TestWatcherRefusedWithoutAValidToken(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	_, _, done := startWatcher(t, dial(t, argo.Addr, "not-a-token"), thresholds)
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err))
		require.ErrorContains(t, err, "token")
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher kept retrying a refused token")
	}
}
