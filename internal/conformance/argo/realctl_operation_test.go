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

// opStuckThreshold is argocd/operation-stuck's threshold in opStuckPolicy; opStuckStep is how long each hook of the
// progressing near miss runs: about half the threshold, so each step restarts the clock well inside it (the
// controller notices a finished hook a few seconds late) while the whole operation runs far longer than it.
const (
	opStuckThreshold = 30 * time.Second
	opStuckStep      = 12 * time.Second
)

// opStuckPolicy reports argocd/operation-stuck after opStuckThreshold (it is never applied unattended, whatever the
// mode) and leaves the hook rules at their defaults, far beyond these tests.
var opStuckPolicy = fmt.Sprintf(`resolveAfter: 1
rules:
  argocd/operation-stuck: {mode: auto, threshold: %s}
`, opStuckThreshold) + routes

// opStuckThresholds is the row text naming opStuckPolicy.
var opStuckThresholds = fmt.Sprintf("serve with operation-stuck on auto (never applied unattended) at %s", opStuckThreshold)

// progressSteps are the hooks of the progressing near miss, one per PreSync wave, so they run one after the other.
var progressSteps = []string{"step-1", "step-2", "step-3", "step-4"}

// argocd/operation-stuck on the real controllers (issue 27 item 6). A sync whose PreSync hook Job never finishes
// while the controller is healthy: the controller keeps the operation Running, "waiting for completion of hook
// batch/Job/migrate", and writes no change for as long as the hook runs. No hook finished, so no hook rule explains
// it (hook-completion-missed judges finished hooks); past the threshold serve announces argocd/operation-stuck about
// the Application, and only that, and applies nothing even on auto: a terminate could abort a hook that is doing
// real work. Released, the hook ends and the same operation succeeds. The near miss is a long sync that keeps
// progressing: four PreSync waves whose hooks each run about half the threshold, the operation Running for far
// longer than the threshold in all; each finished hook changes the operation state, which restarts the clock, so
// nothing is announced, and serve's log shows it evaluated the application (hooks read) with no finding throughout.
func TestOperationStuckOnTheRealController(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV3, testenv.ArgoCDV2} {
		t.Run("on "+version, func(t *testing.T) {
			t.Parallel()
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			t.Run("a sync waiting on a hook that never finishes is operation-stuck, announced and not acted on", func(t *testing.T) {
				operationStuckOnAHookThatRuns(t, stack)
			})
			t.Run("a long sync that keeps progressing is not reported", func(t *testing.T) {
				longProgressingSyncIsNotStuck(t, stack)
			})
		})
	}
}

// operationStuckOnAHookThatRuns is the stuck half of TestOperationStuckOnTheRealController.
func operationStuckOnAHookThatRuns(t *testing.T, stack *testenv.RealArgoCD) {
	r := row(stack.Version, fmt.Sprintf("sync waiting on a PreSync hook Job that never finishes, controller healthy (%s)", opStuckThresholds))
	record(t, r)
	app, _ := testenv.ScenarioRealHookRunning(t, stack, "op-stuck", testenv.RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: testenv.PodRunsUntilReleased})
	waiting := app.Get(t)
	started := waiting.Status.OperationState.StartedAt
	ops := stack.CountOperations(t, app.Name)
	d := startServeDaemon(t, app, opStuckPolicy)

	root := announcedAbout(t, d.slack, syncmedic.RuleOperationStuck, appObject(app), opStuckThreshold+announceWithin)
	stuck := app.Get(t)
	terminations, syncs := ops.Counts()
	r.Controller = "operation left " + testenv.DescribeOperation(stuck)
	r.Syncmedic = fmt.Sprintf("argocd/operation-stuck about the Application, the only incident; remedies applied: %d, terminations %d, new syncs %d",
		len(appliedRemedies(d.slack)), terminations, syncs)
	require.Equal(t, synccommon.OperationRunning, phase(stuck), testenv.DescribeOperation(stuck))
	require.True(t, stuck.Status.OperationState.StartedAt.Equal(&started), "the same operation")
	require.Contains(t, stuck.Status.OperationState.Message, "migrate", "the controller says it waits for the hook")
	require.Equal(t, synccommon.OperationRunning, testenv.HookResult(stuck, "migrate"), testenv.DescribeOperation(stuck))
	require.Contains(t, root.Text, "with no change", "the summary says what operation-stuck saw: %s", root.Text)
	require.Len(t, d.slack.roots(), 1, "one incident: %s", d.slack.summary())

	// A few resyncs later still nothing applied: operation-stuck is never acted on unattended.
	time.Sleep(5 * time.Second)
	terminations, syncs = ops.Counts()
	require.Empty(t, appliedRemedies(d.slack), "operation-stuck is never applied unattended")
	require.Zero(t, terminations, "the running operation is not terminated")
	require.Zero(t, syncs, "syncmedic starts no sync")

	app.Release(t, "migrate")
	after, done := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
	r.Controller += "; hook released: " + testenv.DescribeOperation(after)
	require.True(t, done, "the released hook lets the sync finish: %s", testenv.DescribeOperation(after))
	require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
	require.True(t, after.Status.OperationState.StartedAt.Equal(&started), "the same operation, never terminated")
	onlyAnnounced(t, d.slack, incident{rule: syncmedic.RuleOperationStuck, object: appObject(app)})
	r.Syncmedic += "; the hook released, the same operation succeeded"
}

// longProgressingSyncIsNotStuck is the near miss of TestOperationStuckOnTheRealController.
func longProgressingSyncIsNotStuck(t *testing.T, stack *testenv.RealArgoCD) {
	r := row(stack.Version, fmt.Sprintf("sync of %d PreSync waves, each hook running %s, the operation Running far past the threshold while it progresses (%s)",
		len(progressSteps), opStuckStep, opStuckThresholds))
	record(t, r)
	var hooks []testenv.RealHook
	for i, name := range progressSteps {
		hooks = append(hooks, testenv.RealHook{Name: name, Hook: synccommon.HookTypePreSync, Wave: i, Run: testenv.PodRunsUntilReleased})
	}
	app := testenv.NewRealHookApp(t, stack, "op-progress", testenv.ConfigMapData{}, hooks...)
	d := startServeDaemon(t, app, opStuckPolicy)
	from := d.logLen()
	start := time.Now()
	app.Sync(t)
	for _, name := range progressSteps {
		running, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
			return testenv.OperationRunningSince(start)(a) && testenv.HookResult(a, name) == synccommon.OperationRunning
		})
		require.True(t, ok, "the controller runs hook %s: %s", name, testenv.DescribeOperation(running))
		time.Sleep(opStuckStep)
		app.Release(t, name)
	}
	after, done := app.WaitApp(t, controllerWindow, testenv.OperationCompleted)
	r.Controller = "each hook ran, then the next wave's; " + testenv.DescribeOperation(after)
	require.True(t, done, "the sync finishes: %s", testenv.DescribeOperation(after))
	require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
	op := after.Status.OperationState
	took := op.FinishedAt.Sub(op.StartedAt.Time)
	require.Greater(t, took, opStuckThreshold+opStuckStep, "the operation ran far longer than the threshold")
	r.Syncmedic = fmt.Sprintf("while it ran: %d incident(s) [%s]", len(d.slack.roots()), d.slack.summary())
	require.Empty(t, d.slack.roots(), "a sync that progresses is not stuck, however long it runs: %s", d.slack.summary())
	n := d.lookedAt(t, app, from, true)
	require.Greater(t, n, int((opStuckThreshold+opStuckStep)/time.Second), "serve evaluated the running application about every second (--argocd-live-resync 1s)")
	r.Syncmedic = fmt.Sprintf("no finding while it ran longer than the threshold (serve evaluated it throughout, its hooks read, nothing found); the operation %s",
		strings.ToLower(string(op.Phase)))
}
