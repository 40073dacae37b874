package argo

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// drainPolicy proposes terminate-and-resync for a lost hook (notify); the test turns it to auto by rewriting the
// policy file, re-read every second, once it has paused the application-controller.
const drainPolicy = `resolveAfter: 1
rules:
  argocd/hook-completion-missed: {mode: notify, threshold: 5s, rerunHooks: true}
` + routes

// Issue 45 item 6: a terminate-and-resync in flight when serve is asked to stop (SIGTERM, as a Pod's termination)
// is finished, not left between its TerminateOperation and its Sync. On the real v2.14.21 stack a PreSync migration
// hook is lost (the fast-Job race, forced: ttlSecondsAfterFinished 0, deleted while the controller is paused) and
// the operation waits for it forever. serve announces argocd/hook-completion-missed; the test pauses the
// application-controller (SIGSTOP) so that the terminated operation cannot stop yet, and turns the rule to auto:
// serve sends TerminateOperation (the operation reads Terminating) and waits for the stop. Then serve gets SIGTERM,
// and the controller resumes: the operation ends "Operation terminated", serve — still draining — sends its one
// Sync, and exits 0. Before the drain serve cancelled the remedy on SIGTERM and left the application terminated.
func TestARemedyInFlightIsFinishedWhenServeIsStopped(t *testing.T) {
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	r := row(version, "terminate-and-resync in flight when serve gets SIGTERM: lost migration hook (PreSync, ttlSecondsAfterFinished: 0), controller paused between TerminateOperation and the stop")
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	record(t, r)
	race := fastHookRace(t, stack, "drain", "db-migrate", true)
	app, got := race.app, race.got
	require.False(t, race.finished, "v2.14.21 never sees the deleted hook finish: %s", testenv.DescribeOperation(got))
	require.Equal(t, synccommon.OperationRunning, phase(got), testenv.DescribeOperation(got))
	stuck := got.Status.OperationState.StartedAt

	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte(drainPolicy), 0o600))
	d := startServeDaemon(t, app, drainPolicy, "--policy-file", policyFile, "--policy-reload-interval", "1s")
	lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "db-migrate")}
	announcedAbout(t, d.slack, lost.rule, lost.object, announceWithin)
	require.Empty(t, remediesApplied(d.slack), "notify: nothing applied yet: %s", d.slack.summary())

	resume := stack.PauseController(t)
	require.NoError(t, os.WriteFile(policyFile, []byte(strings.Replace(drainPolicy, "mode: notify", "mode: auto", 1)), 0o600))
	terminating, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
		return phase(a) == synccommon.OperationTerminating
	})
	require.True(t, ok, "serve terminates the operation once the rule is auto: %s\n%s", testenv.DescribeOperation(terminating), d.slack.summary())
	require.Eventually(t, func() bool { return strings.Contains(d.logs.String(), `msg="terminated operation"`) }, 10*time.Second, tick,
		"serve logged its TerminateOperation")

	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	stillRunning := !waitFor(3*time.Second, func() bool {
		select {
		case <-d.done:
			return true
		default:
			return false
		}
	})
	resume()
	select {
	case <-d.done:
	case <-time.After(remedyWithin):
		t.Fatalf("serve did not exit within %s of SIGTERM once the controller resumed", remedyWithin)
	}
	exit := d.cmd.ProcessState.ExitCode()
	after, resynced := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool {
		st := a.Status.OperationState
		return st != nil && st.StartedAt.After(stuck.Time)
	})
	syncs := strings.Count(d.logs.String(), `msg="requested sync"`)
	terminates := strings.Count(d.logs.String(), `msg="terminated operation"`)
	r.Controller = fmt.Sprintf("operation %s; after TerminateOperation, with the controller paused: %s", testenv.DescribeOperation(got), testenv.DescribeOperation(terminating))
	r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed, terminate-and-resync (auto, rerunHooks); SIGTERM with the operation Terminating: serve kept running %t, TerminateOperation %d, Sync %d, exit %d; then operation %s",
		stillRunning, terminates, syncs, exit, testenv.DescribeOperation(after))
	require.True(t, stillRunning, "serve drains the remedy in flight instead of exiting at once:\n%s", d.logs.String())
	require.True(t, resynced, "the remedy's Sync went out during the drain: a new operation started: %s\n%s", testenv.DescribeOperation(after), d.logs.String())
	require.Equal(t, 1, terminates, "one TerminateOperation")
	require.Equal(t, 1, syncs, "exactly one Sync")
	require.Zero(t, exit, "serve exits cleanly once the remedy recorded its result:\n%s", d.logs.String())
	require.Regexp(t, `msg=remediation app=syncmedic who=\S+ action=argocd/terminate-and-resync result=succeeded`, d.logs.String(),
		"the audit line of the finished remedy")
	onlyAnnounced(t, d.slack, lost)
}

// TestARemedyCutOffAfterItsTerminateIsFinishedOnceByTheNextServe: serve terminates a lost hook's operation and is
// SIGKILLed while the controller is paused (after its checkpoint "sync pending" is in the state file, before its
// Sync); a second serve on the same state file finishes the sync exactly once: counted on the controller's side, one
// new operation after the terminated one, and no other within the watch.
func TestARemedyCutOffAfterItsTerminateIsFinishedOnceByTheNextServe(t *testing.T) {
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	r := row(version, "terminate-and-resync cut off: serve SIGKILLed after TerminateOperation (controller paused), a second serve on its state file: lost migration hook (PreSync, ttlSecondsAfterFinished: 0)")
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	record(t, r)
	race := fastHookRace(t, stack, "killed", "db-migrate", true)
	app, got := race.app, race.got
	require.False(t, race.finished, "v2.14.21 never sees the deleted hook finish: %s", testenv.DescribeOperation(got))
	require.Equal(t, synccommon.OperationRunning, phase(got), testenv.DescribeOperation(got))
	stuck := got.Status.OperationState.StartedAt

	dir := t.TempDir()
	policyFile, stateFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "state.json")
	require.NoError(t, os.WriteFile(policyFile, []byte(drainPolicy), 0o600))
	flags := []string{"--policy-file", policyFile, "--policy-reload-interval", "1s", "--state-file", stateFile}
	first := startServeDaemon(t, app, drainPolicy, flags...)
	lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "db-migrate")}
	announcedAbout(t, first.slack, lost.rule, lost.object, announceWithin)

	resume := stack.PauseController(t)
	require.NoError(t, os.WriteFile(policyFile, []byte(strings.Replace(drainPolicy, "mode: notify", "mode: auto", 1)), 0o600))
	_, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool { return phase(a) == synccommon.OperationTerminating })
	require.True(t, ok, "serve terminates the operation once the rule is auto: %s", first.slack.summary())
	checkpoint := regexp.MustCompile(`"pending":\s*"sync"`)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(stateFile)
		return err == nil && checkpoint.Match(b)
	}, remedyWithin, tick, "serve saves its checkpoint (sync pending) after TerminateOperation")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.done
	resume()
	terminated, ok := app.WaitApp(t, controllerWindow, func(a *v1alpha1.Application) bool { return phase(a) == synccommon.OperationFailed })
	require.True(t, ok, "the resumed controller ends the terminated operation: %s", testenv.DescribeOperation(terminated))
	require.Equal(t, 0, strings.Count(first.logs.String(), `msg="requested sync"`), "the killed serve never synced")

	second := startServeDaemonOn(t, app, first.slack, drainPolicy, flags...)
	resynced, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
		st := a.Status.OperationState
		return st != nil && !st.StartedAt.Equal(&stuck)
	})
	require.True(t, ok, "the second serve finishes the pending sync: %s\n%s", testenv.DescribeOperation(resynced), second.logs.String())
	newOp := resynced.Status.OperationState.StartedAt
	again := waitFor(unattendedWatch, func() bool {
		st := app.Get(t).Status.OperationState
		return st != nil && !st.StartedAt.Equal(&stuck) && !st.StartedAt.Equal(&newOp)
	})
	after := app.Get(t)
	syncs := strings.Count(second.logs.String(), `msg="requested sync"`)
	r.Controller = fmt.Sprintf("operation %s; after serve's TerminateOperation and SIGKILL, the controller resumed: %s; after the second serve: %s",
		testenv.DescribeOperation(got), testenv.DescribeOperation(terminated), testenv.DescribeOperation(resynced))
	r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed, terminate-and-resync (auto, rerunHooks) cut off after TerminateOperation with its checkpoint \"sync pending\" saved; "+
		"the second serve resumed it: one new operation (%t), %s later no other operation (%t), no second TerminateOperation (%t)",
		!newOp.Equal(&stuck), unattendedWatch, !again, !strings.Contains(second.logs.String(), `msg="terminated operation"`))
	require.Contains(t, second.logs.String(), `msg="remediation resumed"`, "the second serve resumed the remedy")
	require.False(t, again, "exactly one new operation: %s", testenv.DescribeOperation(after))
	require.Equal(t, 1, syncs, "one Sync:\n%s", second.logs.String())
	require.NotContains(t, second.logs.String(), `msg="terminated operation"`, "the terminate is not repeated")
	onlyAnnounced(t, first.slack, lost)
}
