package argo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// How long TestGenerateNameHookIsNotReSyncedInALoop watches: a loop of terminate-and-resync takes well under a minute
// here (15 s threshold, then terminate, sync, and the hook lost again), so loopWindow sees several turns of it; once
// the remedy was declined as a repeat, loopQuiet more shows that nothing follows.
const (
	loopWindow = 4 * time.Minute
	loopQuiet  = 45 * time.Second
)

// Issue 26 item 4 on the real controller: a PreSync hook Job named by generateName, ttlSecondsAfterFinished: 0, on
// v2.14.21, which loses the fast-Job race on every operation. gitops-engine names the hook anew for every operation
// (<prefix><rev7>-presync-<startedAt>), so an incident and a rate limit keyed by the hook's name never see the
// previous one. With hook-completion-missed on auto, syncmedic finds the lost hook (the stuck variant: exact rule,
// that very Job), terminates and re-syncs once; the re-sync loses the same race, and syncmedic then hands it to a
// person instead of terminating and re-syncing again (and re-running every hook) in a loop.
func TestGenerateNameHookIsNotReSyncedInALoop(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	t.Run("on "+version+" a generateName TTL-0 hook lost on every operation is terminated and re-synced once, not in a loop", func(t *testing.T) {
		t.Parallel()
		r := row(version, fmt.Sprintf("generateName hook Job (ttlSecondsAfterFinished: 0) lost on every operation (serve on auto: hook-completion-missed 15s, default rate limit; watched %s)", loopWindow))
		stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
		record(t, r)
		app, stuck, finished := lostOnANewApp(t, func() *testenv.RealHookApp { return testenv.ScenarioRealGenerateNameFastHook(t, stack) })
		r.Controller = fmt.Sprintf("operation after %s: %s", controllerWindow, testenv.DescribeOperation(stuck))
		require.False(t, finished, "v2.14.21 never sees the TTL-0 hook finish: %s", testenv.DescribeOperation(stuck))
		require.Equal(t, synccommon.OperationRunning, phase(stuck))
		hook := lostHookName(stuck)
		require.True(t, strings.HasPrefix(hook, testenv.GenerateNameHookPrefix), "the operation waits for the generated hook: %s", testenv.DescribeOperation(stuck))

		ops := stack.CountOperations(t, app.Name)
		srv := startServe(t, app, safetyPolicy)
		first := incidentAbout(t, srv, app, syncmedic.RuleHookCompletionMissed, hook, announceWithin+15*time.Second)
		notRepeated := func() bool { return strings.Contains(srv.summary(), "not repeated") }
		looped := func() bool { terminations, _ := ops.Counts(); return terminations >= 2 }
		waitFor(loopWindow, func() bool { return notRepeated() || looped() })
		if !looped() {
			waitFor(loopQuiet, looped)
		}
		terminations, syncs := ops.Counts()
		cur := app.Get(t)
		r.Controller += "; at the end: " + testenv.DescribeOperation(cur)
		r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed about Job %s; %d incident(s) (%s); terminations %d, new syncs %d; first thread: %s",
			hook, len(srv.roots()), rootRulesOf(srv), terminations, syncs, resolvedThread(t, srv, first))
		require.Equal(t, 1, terminations, "terminated once, not in a loop: %s", srv.summary())
		require.Equal(t, 1, syncs, "re-synced once, not in a loop: %s", srv.summary())
		require.True(t, notRepeated(), "the recurrence is handed to a person: %s", srv.summary())
		for _, m := range srv.roots() {
			require.Contains(t, m.Blocks, "|"+string(syncmedic.RuleHookCompletionMissed), "only the lost hook is reported: %s", srv.summary())
		}
	})
}

// lostHookName is the name of the hook the operation still records Running ("" when none).
func lostHookName(app *v1alpha1.Application) string {
	st := app.Status.OperationState
	if st == nil || st.SyncResult == nil {
		return ""
	}
	for _, r := range st.SyncResult.Resources {
		if r.HookType != "" && r.HookPhase == synccommon.OperationRunning {
			return r.Name
		}
	}
	return ""
}
