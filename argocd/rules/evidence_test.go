package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
)

// TestRemoveHookFinalizerLeavesARecreatedHookAlone checks the rules' half: the patch a finding carries tests the
// hook's UID (argocd/remedy's test of the same name checks that the remedy leaves a re-created hook alone).
func TestRemoveHookFinalizerLeavesARecreatedHookAlone(t *testing.T) {
	const oldUID = "11111111-aaaa"
	t.Run("the patch tests the hook's UID", func(t *testing.T) {
		h := hookJob(t, []string{HookFinalizer}, ago(time.Hour), true)
		h.SetUID(types.UID(oldUID))
		rem := removeFinalizerRemedy(AppObservation{App: app(runningOp(time.Hour, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning))}, h, 0, false)
		require.Equal(t, `[{"op":"test","path":"/metadata/uid","value":"11111111-aaaa"},{"op":"test","path":"/metadata/finalizers/0","value":"argocd.argoproj.io/hook-finalizer"},{"op":"remove","path":"/metadata/finalizers/0"}]`,
			rem.Params[ParamPatch])
		require.Equal(t, oldUID, rem.Params[ParamUID])
	})
}
