package argo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Bounded waits of these tests. A near miss watches nearMissWindow, longer than every threshold of the policy it
// runs (autoPolicy's longest is hook-completion-missed's 30 s), so a false positive has the time to show.
const (
	controllerWindow = 45 * time.Second // how long the real controller gets to finish an operation by itself
	announceWithin   = 60 * time.Second
	remedyWithin     = 2 * time.Minute
	nearMissWindow   = 40 * time.Second
	tick             = 200 * time.Millisecond
)

// autoPolicy acts on the hook rules after a few seconds (re-running hooks allowed where the remedy re-syncs);
// operation-stuck keeps its default threshold (30 min): a hook that runs is not stuck. hook-completion-missed, which
// may terminate, waits 30 s after a hook finished: v3.6.1's controller was seen noticing a finished hook more than 5 s
// late, and a shorter threshold then terminated a healthy sync.
const autoPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
  argocd/hook-completion-missed: {mode: auto, threshold: 30s, rerunHooks: true}
  argocd/hook-immutable: {mode: auto, rerunHooks: true}
` + routes

// autoThresholds says autoPolicy's thresholds in the words of a conformance row.
const autoThresholds = "hook-finalizer-stuck 3s, hook-completion-missed 30s after the hook finished, hook-immutable at once, operation-stuck 30m"

// routes sends every incident of these tests to routedChannel, not serve's --slack-channel: announced checks that
// every message of the incident's thread went there (issue 14 item 7, through the real controllers).
const routes = `routes:
  - name: default-project
    match: {projects: [default], rules: ["argocd/*"]}
    slackChannel: "` + routedChannel + `"
`

const routedChannel = "#argocd-default-project"

// argoEnv is the control plane every Argo CD stack of this package runs on: the real node's (RealNodeWhileUsed), so
// that the hooks of every scenario (RealHookApp) and the Deployments' Pods run as containers under a real kubelet,
// with the node's own timing. The node is one per machine: the other test binaries that need it wait until this
// one's last test has ended (and nodeIdleGrace has passed).
func argoEnv(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.RealNodeWhileUsed(t).Env
}

// row is a conformance row recorded when the test ends, with whatever the test filled in by then. Every scenario of
// this package runs its Pods on the real node (argoEnv): its rows say "kubelet: real".
func row(version, scenario string) *conformance.Row {
	r := &conformance.Row{Tool: "Argo CD", Version: version, Scenario: scenario, Kubelet: "real",
		Controller: "(test ended before observing)", Syncmedic: "(test ended before observing)"}
	return r
}

// record records r as filled in when the test ends (Record itself then marks it passed or failed).
func record(t *testing.T, r *conformance.Row) {
	t.Cleanup(func() { conformance.Record(t, *r) })
}

// waitFor polls cond until it holds or d passes; it reports whether it held. For near misses, where the expected
// outcome is that nothing happens within a window.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(tick)
	}
}

// announced waits until Slack got the root message of an incident of rule and returns it; it does not look at the
// object: announcedAbout does, and checks that nothing else was announced.
func announced(t *testing.T, srv *fakeSlack, rule syncmedic.RuleID, within time.Duration) slackMessage {
	t.Helper()
	var root slackMessage
	require.Eventually(t, func() bool {
		var ok bool
		root, ok = srv.rootWithRule(string(rule))
		return ok
	}, within, tick, "%s is announced on Slack (received: %s)", rule, srv.summary())
	require.Equal(t, routedChannel, root.Channel, "the policy's route picks the channel")
	return root
}

// thread summarises a Slack thread for a conformance row: the replies, shortened.
func thread(srv *fakeSlack, root slackMessage) string {
	var parts []string
	for _, r := range srv.replies(root.TS) {
		if i := strings.IndexByte(r, '\n'); i >= 0 {
			r = r[:i]
		}
		parts = append(parts, r)
	}
	return strings.Join(parts, " / ")
}

// nearMiss watches a healthy application for nearMissWindow: nothing may be announced, and serve must have
// evaluated it meanwhile and found nothing (lookedAt; with running, its hook objects read too). It fills in
// r.Syncmedic and returns whether anything was announced (the caller lets the controller finish before failing, so
// the row says what it did).
func nearMiss(t *testing.T, d *serveDaemon, app *testenv.RealHookApp, r *conformance.Row, thresholds string, running bool) bool {
	t.Helper()
	from := d.logLen()
	if waitFor(nearMissWindow, func() bool { return len(d.slack.roots()) > 0 }) {
		r.Syncmedic = "FALSE POSITIVE: " + d.slack.summary()
		return true
	}
	n := d.lookedAt(t, app, from, running)
	read := ""
	if running {
		read = ", its hooks read"
	}
	r.Syncmedic = fmt.Sprintf("no finding, no action within %s (%s): evaluated %d times%s, nothing found", nearMissWindow, thresholds, n, read)
	return false
}

func completedSince(start time.Time) func(*v1alpha1.Application) bool {
	return func(app *v1alpha1.Application) bool {
		return testenv.OperationCompleted(app) && !app.Status.OperationState.StartedAt.Time.Before(start.Truncate(time.Second))
	}
}

func phase(app *v1alpha1.Application) synccommon.OperationPhase { return testenv.OperationPhase(app) }

// The fast-Job race (argo-cd #21055, #6880), forced, on the real node: a PreSync hook Job with
// ttlSecondsAfterFinished: 0 runs as a busybox container that waits for a release file; the test pauses the real
// application-controller (SIGSTOP), releases the container (it exits 0), waits until the real TTL controller has
// deleted the Job, and resumes the controller — what happens when a fast Job completes between two looks of a busy
// controller, with the kubelet's, containerd's and the Job controller's own timing. v2.14.21 never sees the hook
// finish: the operation waits for it forever; syncmedic announces argocd/hook-completion-missed about the Job and,
// on auto with rerunHooks, terminates and re-syncs once. The re-sync runs the TTL-0 hook again, and the test makes it
// lose the same race (its container held until the first incident resolved, then released with the controller
// paused again): the remedy is then proposed to a person, not repeated. The resumed controller can still replay the
// Job's completion from its watch before the deletion (fastHookRace); the first race is then run again on a new app,
// and a re-sync that wins is asserted as succeeded and said so in the row. Either way the node counts two starts of
// the hook's container, the first sync's and the re-sync's. v3.6.1's hook finalizer keeps the deleted Job until the controller has seen it
// finish: the sync succeeds, nothing is reported, and the hook ran once.
//
// It runs before the parallel tests (not t.Parallel; its two versions in parallel), beside
// TestALostMigrationHookNeverRunsTwiceUnattended.
func TestFastHookJobWithTTLZero(t *testing.T) {
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		v2 := version == testenv.ArgoCDV2
		name := "on " + version + " a hook Job deleted by its TTL before the controller saw it finish leaves the sync waiting, and is reported and recovered"
		if !v2 {
			name = "on " + version + " a hook Job deleted by its TTL before the controller saw it finish is held by the hook finalizer and the sync finishes"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := row(version, "fast hook Job (ttlSecondsAfterFinished: 0) completing and TTL-deleted while the controller does not look (paused)")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			race := fastHookRace(t, stack, "fast-hook", "clean-reports", v2)
			app, start, held, heldDesc, got, finished := race.app, race.start, race.held, race.heldDesc, race.got, race.finished
			_, job := app.JobState(t, "clean-reports")
			r.Controller = fmt.Sprintf("hook Job while the controller was paused: %s; %s after it resumed: operation %s; hook Job %s",
				heldDesc, controllerWindow, testenv.DescribeOperation(got), job)

			if !v2 {
				require.NotNil(t, held, "v3's hook finalizer keeps the TTL-deleted Job until the controller saw it")
				require.Contains(t, held.Finalizers, testenv.HookFinalizer)
				require.True(t, finished, "v3.6.1 finishes the sync: %s", testenv.DescribeOperation(got))
				require.Equal(t, synccommon.OperationSucceeded, phase(got), testenv.DescribeOperation(got))
				require.True(t, app.WaitJob(t, "clean-reports", controllerWindow, func(j *batchv1.Job) bool { return j == nil }),
					"the controller releases the hook Job")
				d := startServeDaemon(t, app, autoPolicy)
				require.False(t, nearMiss(t, d, app, r, autoThresholds, false), "a finished sync is not reported: %s", d.slack.summary())
				runs := app.Runs(t, "clean-reports")
				r.Syncmedic += fmt.Sprintf("; the node ran the hook's container %d time(s)", runs)
				require.Equal(t, 1, runs, "the hook ran once on the node")
				return
			}
			if held != nil {
				require.NotContains(t, held.Finalizers, testenv.HookFinalizer, "v2.14.21 puts no finalizer on its hooks")
			}
			require.False(t, finished, "v2.14.21 never sees the deleted hook finish: %s", testenv.DescribeOperation(got))
			require.Equal(t, synccommon.OperationRunning, phase(got), "the operation is waiting: %s", testenv.DescribeOperation(got))
			require.Contains(t, got.Status.OperationState.Message, "clean-reports")
			require.Equal(t, 1, app.Runs(t, "clean-reports"), "the lost hook ran once on the node before syncmedic started")

			// The re-sync runs the TTL-0 hook again; its Pod is held until the first incident has resolved and the
			// controller is paused again, so that it loses the same race every time (unpaused it usually does too,
			// but not always).
			app.Hold(t, "clean-reports")
			srv := startServe(t, app, autoPolicy)
			lost := incident{rule: syncmedic.RuleHookCompletionMissed, object: jobObject(app, "clean-reports")}
			root := announcedAbout(t, srv, lost.rule, lost.object, announceWithin)
			r.Syncmedic = "argocd/hook-completion-missed announced about the hook Job clean-reports"
			resync, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
				return testenv.OperationRunningSince(start)(a) && a.Status.OperationState.StartedAt.After(got.Status.OperationState.StartedAt.Time) &&
					strings.Contains(a.Status.OperationState.Message, "clean-reports")
			})
			require.True(t, ok, "the remedy's new sync waits for the hook it ran again: %s (%s)", testenv.DescribeOperation(resync), srv.summary())
			require.True(t, app.WaitJob(t, "clean-reports", controllerWindow, func(j *batchv1.Job) bool { return j != nil }),
				"the new sync created the hook Job again")
			// The first incident resolves while the new sync's hook runs; only then does the hook finish, unseen.
			resolvedThread(t, srv, root)
			loseTheFastHookRace(t, app, "clean-reports")

			// syncmedic applied the remedy once; when the condition comes back it proposes it to a person instead of
			// looping. The resumed controller may still replay the Job's completion from its watch before the deletion
			// (see fastHookRace): then the re-sync succeeds, and the row says so.
			notRepeated := func() bool { return strings.Contains(srv.summary(), "not repeated") }
			resynced := func(a *v1alpha1.Application) bool {
				return completedSince(start)(a) && a.Status.OperationState.StartedAt.After(got.Status.OperationState.StartedAt.Time)
			}
			settled := waitFor(remedyWithin, func() bool { return notRepeated() || resynced(app.Get(t)) })
			after := app.Get(t)
			require.True(t, settled, "the remedy is not repeated when the re-sync loses its hook too, or the re-sync finishes: %s; operation %s", srv.summary(), testenv.DescribeOperation(after))
			incidents := len(srv.roots())
			runs := app.Runs(t, "clean-reports")
			// The row names both ways the re-sync can end (the resumed controller's timing picks one; the test asserts
			// each and logs which it was), so that it is the same in every run (make compat-check).
			r.Syncmedic = fmt.Sprintf("argocd/hook-completion-missed announced about the hook Job clean-reports, nothing else; first thread: %s; the node ran the hook's container %d times (the sync's, the re-sync's); "+
				"then either the re-sync lost the same race (forced: controller paused) and the remedy was not repeated but proposed to a person (2 incidents, operation Running), "+
				"or the resumed controller saw the re-sync's hook finish after all and the re-sync succeeded (1 incident); both asserted",
				resolvedThread(t, srv, root), runs)
			require.Len(t, remediesApplied(srv), 1, "the remedy is applied once: %s", srv.summary())
			onlyAnnounced(t, srv, lost)
			require.Equal(t, 2, runs, "rerunHooks: the one re-sync ran the hook once more on the node, no more")
			if !notRepeated() {
				require.Equal(t, 1, incidents, "the re-sync succeeded: one incident: %s", srv.summary())
				require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
				t.Logf("the resumed controller saw the re-sync's hook finish after all: the re-sync succeeded (%s)", testenv.DescribeOperation(after))
				return
			}
			require.Equal(t, 2, incidents, "one remedy, then one proposal, never a loop: %s", srv.summary())
			require.Equal(t, synccommon.OperationRunning, phase(after), "the re-sync waits for its lost hook: %s", testenv.DescribeOperation(after))
			require.Contains(t, after.Status.OperationState.Message, "clean-reports", testenv.DescribeOperation(after))
			t.Logf("the re-sync lost the same race, and the remedy was not repeated: proposed to a person (%s)", testenv.DescribeOperation(after))
		})
	}
}

// loseTheFastHookRace lets hook Job name (held Running by PodRunsUntilReleased) finish while the application-controller
// is paused, and resumes it only once the TTL controller has deleted the Job: on v2.14.21 the controller then never
// sees the hook finish.
func loseTheFastHookRace(t *testing.T, app *testenv.RealHookApp, name string) {
	t.Helper()
	resume := app.Stack.PauseController(t)
	app.Release(t, name)
	gone := app.WaitJob(t, name, controllerWindow, func(j *batchv1.Job) bool { return j == nil })
	resume()
	require.True(t, gone, "the TTL controller deletes the finished hook Job while the controller is paused")
}

// resolvedThread waits until root's thread holds the incident's "Resolved" reply, then summarises the thread (thread):
// read earlier, the thread depends on how far serve had got.
func resolvedThread(t *testing.T, srv *fakeSlack, root slackMessage) string {
	t.Helper()
	require.True(t, waitFor(announceWithin, func() bool { return strings.Contains(thread(srv, root), "Resolved") }),
		"the incident resolves: %s", srv.summary())
	return thread(srv, root)
}

// notifyPolicy reports the hook rules after a few seconds and acts on none.
const notifyPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: notify, threshold: 3s}
  argocd/hook-completion-missed: {mode: notify, threshold: 5s}
` + routes

// notifyThresholds says notifyPolicy's thresholds in the words of a conformance row.
const notifyThresholds = "notify only: hook-finalizer-stuck 3s, hook-completion-missed 5s after the hook finished, operation-stuck 30m"

// Healthy near miss on v3 (issue 13 item 1): a PreSync wave with a slow hook (its Pod running) and a fast hook Job
// deleted by its TTL at completion. On v3 the fast Job stays deleting, held by argocd.argoproj.io/hook-finalizer,
// until the wave ends — by design; removing the finalizer then would re-create the fast-Job race. Nothing may be
// reported or done while the slow hook runs; once it exits, the real controller finishes the sync and releases the
// fast Job.
func TestSlowAndFastHookWaveIsNotStuckOnV3(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV3
	t.Run("on "+version+" a TTL-deleted hook waiting for its wave is neither reported nor touched", func(t *testing.T) {
		t.Parallel()
		r := row(version, "slow hook beside a TTL-deleted fast hook in one wave")
		stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
		record(t, r)
		app := testenv.ScenarioRealSlowAndFastWave(t, stack)
		fast, fastDesc := app.JobState(t, "fast")
		// The phase only: the operation's message and hook results at this moment follow how far the controller's
		// pass had got ("Running" alone, or "waiting for completion of hook … and 2 more hooks" in another run).
		r.Controller = fmt.Sprintf("while the slow hook runs: operation %s; fast Job %s", phase(app.Get(t)), fastDesc)
		require.NotNil(t, fast, "the hook finalizer keeps the TTL-deleted fast Job until the wave ends")
		require.Contains(t, fast.Finalizers, testenv.HookFinalizer)

		d := startServeDaemon(t, app, autoPolicy)
		fired := nearMiss(t, d, app, r, autoThresholds+"; the fast hook finished before serve started", true)
		_, stillThere := app.JobState(t, "fast")

		app.Release(t, "slow")
		after, ok := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
		_, fastAfter := app.JobState(t, "fast")
		r.Controller += fmt.Sprintf("; after the slow hook exits: %s; fast Job %s", testenv.DescribeOperation(after), fastAfter)
		require.False(t, fired, "a healthy wave is reported (fast Job while reported: %s): %s", stillThere, d.slack.summary())
		require.True(t, ok, "the sync finishes once the slow hook exits: %s", testenv.DescribeOperation(after))
		require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
		require.Empty(t, d.slack.roots(), "nothing is reported after the slow hook finished either: %s", d.slack.summary())
		require.True(t, app.WaitJob(t, "fast", remedyWithin, func(j *batchv1.Job) bool { return j == nil }),
			"the real controller releases the fast Job once the wave ends")
	})
}

// The same wave on v2.14.21, which has no hook finalizer: the TTL controller deletes the fast Job before the
// controller sees it finish, so the sync can never finish, even after the slow hook exits (the fast-Job race).
// Nothing is reported while the slow hook runs — terminating then would kill it (a migration, partway) — and
// argocd/hook-completion-missed is reported once it has exited.
func TestSlowAndFastHookWaveLosesTheFastHookOnV2(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV2
	t.Run("on "+version+" a TTL-deleted hook beside a slow one is reported only once the slow one has exited", func(t *testing.T) {
		t.Parallel()
		r := row(version, "slow hook beside a TTL-deleted fast hook in one wave")
		stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
		record(t, r)
		app := testenv.ScenarioRealSlowAndFastWave(t, stack)
		_, fastDesc := app.JobState(t, "fast")
		// The phase only: the operation's message and hook results at this moment follow how far the controller's
		// pass had got ("Running" alone, or "waiting for completion of hook … and 2 more hooks" in another run).
		r.Controller = fmt.Sprintf("while the slow hook runs: operation %s; fast Job %s", phase(app.Get(t)), fastDesc)

		d := startServeDaemon(t, app, notifyPolicy)
		srv := d.slack
		require.False(t, nearMiss(t, d, app, r, notifyThresholds+"; the fast hook finished before serve started", true),
			"nothing is reported while the slow hook still runs: %s", srv.summary())
		r.Syncmedic = "while the slow hook runs: " + r.Syncmedic

		app.Release(t, "slow")
		require.True(t, app.WaitJob(t, "slow", controllerWindow, func(j *batchv1.Job) bool {
			_, desc := app.JobState(t, "slow")
			return j == nil || strings.HasPrefix(desc, "Complete")
		}), "the slow hook completes")
		after, finished := app.WaitApp(t, controllerWindow, testenv.OperationCompleted)
		r.Controller += fmt.Sprintf("; %s after the slow hook exits: %s", controllerWindow, testenv.DescribeOperation(after))
		require.False(t, finished, "v2.14.21 never sees the fast hook finish: %s", testenv.DescribeOperation(after))
		require.Contains(t, after.Status.OperationState.Message, "fast")
		root := announcedAbout(t, srv, syncmedic.RuleHookCompletionMissed, jobObject(app, "fast"), announceWithin)
		r.Syncmedic += "; then argocd/hook-completion-missed announced about the Job fast, nothing else (notify): " + root.Text
		require.Never(t, func() bool { return len(srv.roots()) > 1 }, 5*time.Second, tick, "one incident: %s", srv.summary())
	})
}

// Healthy near miss: a sync whose PreSync hook is still running (a long migration). Nothing is reported or done.
func TestSyncRunningItsHookIsNotStuck(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a sync waiting for a running hook is neither reported nor touched", func(t *testing.T) {
			t.Parallel()
			r := row(version, "near miss: sync still running its hook")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app := testenv.ScenarioRealRunningHook(t, stack)
			_, hook := app.JobState(t, "migrate")
			r.Controller = fmt.Sprintf("operation %s; hook Job %s", testenv.DescribeOperation(app.Get(t)), hook)

			d := startServeDaemon(t, app, autoPolicy)
			fired := nearMiss(t, d, app, r, autoThresholds, true)
			app.Release(t, "migrate")
			after, ok := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
			r.Controller += "; after the hook exits: " + testenv.DescribeOperation(after)
			require.False(t, fired, "a running hook is not stuck: %s", d.slack.summary())
			require.True(t, ok, "the sync finishes once the hook exits: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.Empty(t, d.slack.roots(), "nothing is reported after the hook finished either: %s", d.slack.summary())
		})
	}
}

// The hook-finalizer leak of Argo CD 3.0 before v3.0.16 (argo-cd #24187; gitops-engine #761/#762/#770): a Sync hook
// Job (ttlSecondsAfterFinished: 0) in the wave of a resource that fails to apply (its namespace does not exist). v3.0.12 fails the operation while
// the hook it created runs, and never removes the hook's finalizer: the TTL-deleted Job stays deleting forever.
// syncmedic announces argocd/hook-finalizer-stuck and its remedy (remove exactly that finalizer) lets the Job go, and
// the app syncs again. The same steps on v3.6.1 leave nothing behind and nothing is reported.
func TestHookFinalizerLeakedByAFailedWave(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV3Leaky, testenv.ArgoCDV3} {
		leaky := version == testenv.ArgoCDV3Leaky
		name := "on " + version + " a wave that fails to apply leaves no hook holding the finalizer"
		if leaky {
			name = "on " + version + " a hook leaked by a wave that fails to apply is reported and released"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := row(version, "hook finalizer leak: wave fails to apply while its hook runs")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealFailedWaveHookLeak(t, stack)
			got, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok, "the second sync ends: %s", testenv.DescribeOperation(got))
			require.True(t, app.WaitJob(t, "report", controllerWindow, func(j *batchv1.Job) bool {
				return j == nil || j.DeletionTimestamp != nil
			}), "the TTL controller deletes the finished hook Job")
			job, jobDesc := app.JobState(t, "report")
			r.Controller = fmt.Sprintf("operation %s; hook Job %s", testenv.DescribeOperation(got), jobDesc)
			require.Equal(t, synccommon.OperationFailed, phase(got), testenv.DescribeOperation(got))

			d := startServeDaemon(t, app, autoPolicy)
			srv := d.slack
			if !leaky {
				require.Nil(t, job, "v3.6.1 removes the finalizer of the hook it waited for: %s", jobDesc)
				require.False(t, nearMiss(t, d, app, r, autoThresholds, false), "nothing is reported: %s", srv.summary())
				return
			}
			require.NotNil(t, job, "v3.0.12 leaks the hook finalizer")
			require.Contains(t, job.Finalizers, testenv.HookFinalizer)
			root := announcedAbout(t, srv, syncmedic.RuleHookFinalizerStuck, jobObject(app, "report"), announceWithin)
			gone := app.WaitJob(t, "report", remedyWithin, func(j *batchv1.Job) bool { return j == nil })
			r.Syncmedic = fmt.Sprintf("argocd/hook-finalizer-stuck announced; thread: %s", thread(srv, root))
			require.True(t, gone, "the remedy releases the leaked Job: %s", srv.summary())
			r.Syncmedic = fmt.Sprintf("argocd/hook-finalizer-stuck announced; thread: %s", resolvedThread(t, srv, root))
			r.Syncmedic += "; Job released"

			// The app is not blocked any more: without the bad ConfigMap, the real controller syncs.
			app.Update(t, testenv.ConfigMapData{}, testenv.FailedWaveHook)
			again := time.Now()
			app.Sync(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(again))
			require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the next sync succeeds: %s", testenv.DescribeOperation(after))
			r.Syncmedic += "; next sync " + string(phase(after))
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.summary())
			require.Len(t, remediesApplied(srv), 1, "one remedy: %s", srv.summary())
		})
	}
}

// A named hook Job whose failed run is kept (hook-delete-policy HookSucceeded), then fixed in git with a new Pod
// template: every sync's apply over the old Job is refused ("field is immutable"), and the policy keeps the old Job.
// syncmedic announces argocd/hook-immutable and proposes deleting the old hook through Argo CD; doing so and syncing
// gets the real controller past it.
func TestImmutableHookTemplateChange(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a fixed template of a kept failed hook Job fails every sync and is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, "immutable hook: failed hook Job kept (HookSucceeded), template fixed in git")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealImmutableHook(t, stack)
			got, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			_, jobDesc := app.JobState(t, "db-migrate")
			r.Controller = fmt.Sprintf("operation %s; old hook Job %s", testenv.DescribeOperation(got), jobDesc)
			require.True(t, ok, "the second sync ends: %s", testenv.DescribeOperation(got))
			require.NotEqual(t, synccommon.OperationSucceeded, phase(got), testenv.DescribeOperation(got))
			require.Contains(t, got.Status.OperationState.Message+fmt.Sprint(got.Status.OperationState.SyncResult), "immutable")
			require.True(t, strings.HasPrefix(jobDesc, "Failed"), "the failed hook Job is kept: %s", jobDesc)

			srv := startServe(t, app, autoPolicy)
			root := announcedAbout(t, srv, syncmedic.RuleHookImmutable, jobObject(app, "db-migrate"), announceWithin)
			require.Contains(t, root.Text, "kept by its delete policy")
			r.Syncmedic = "argocd/hook-immutable announced, naming the delete policy that keeps the old hook; remedy proposed (argocd app delete-resource, then sync), not applied"
			require.False(t, waitFor(nearMissWindow, func() bool {
				cur := app.Get(t)
				return cur.Status.OperationState != nil && cur.Status.OperationState.StartedAt.After(got.Status.OperationState.StartedAt.Time)
			}), "nothing is done unattended (no new sync): deleting a hook object is a person's call")

			// The person runs the proposed command through Argo CD, then syncs: the real controller gets past it.
			app.DeleteJob(t, "db-migrate")
			require.True(t, app.WaitJob(t, "db-migrate", controllerWindow, func(j *batchv1.Job) bool { return j == nil }), "the old hook is gone")
			again := time.Now()
			app.Sync(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(again))
			r.Syncmedic += fmt.Sprintf("; after the proposed delete-resource and a sync: %s", testenv.DescribeOperation(after))
			require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the proposed fix gets the real controller past it: %s\nSlack: %s",
				testenv.DescribeOperation(after), srv.summary())
			require.NotContains(t, srv.summary(), "Applying", "while the person's delete is under way syncmedic starts no sync of its own (it would race theirs)")
			require.Len(t, srv.roots(), 1, "one incident: %s", srv.summary())
			onlyAnnounced(t, srv, incident{rule: syncmedic.RuleHookImmutable, object: jobObject(app, "db-migrate")})
		})
	}
}
