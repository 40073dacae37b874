package argo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"

	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Issue 13 item 7 on the real Argo CD: one object, one plan. A named PreSync hook Job whose failed run is kept
// (hook-delete-policy HookSucceeded) also carries argocd.argoproj.io/hook-finalizer — as Argo CD v2.14.3, the only
// 2.x release that added it, leaves it on a hook it kept, and 2.14.4+ never removes it (the test plays that
// v2.14.3); then its template is fixed in git and the app synced again. Every sync fails
// ("field is immutable"), and the Job matches two rules at once, each with an automatic remedy: hook-immutable and
// hook-finalizer-stuck. With every hook rule on auto, syncmedic opens one incident for the Job (hook-immutable, the
// finalizer finding folded into its evidence) and applies one remedy, once: remove the hook finalizer. It does not
// sync afterwards — the old Job stays, kept by its delete policy, and a sync would fail the same way (found here:
// the rule used to plan remove-then-sync; argocd/rules/rules.go now plans the sync only when the finalizer is what keeps
// the hook). Deleting the old hook stays a person's call; once done, the real controller syncs.
//
// v3.6.1 removes hook finalizers from existing hooks when a sync starts (gitops-engine #770), from the object its
// cluster cache holds: the scenario starts the second sync once the controller's cache holds the leftover finalizer
// (a sync started from a cache without it leaves it, and syncmedic's remedy removed it: a full run's other outcome), so
// there the second sync strips it itself, and only hook-immutable (no automatic remedy) remains.
func TestAHookMatchingTwoRulesGetsOnePlanAndOneRemedy(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" a kept immutable hook that also holds the hook finalizer gets one incident and at most one remedy", func(t *testing.T) {
			t.Parallel()
			r := row(version, "one plan per object: failed immutable hook kept by HookSucceeded, holding the hook finalizer (left by v2.14.3, played), all hook rules auto")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealImmutableHookWithFinalizers(t, stack, testenv.HookFinalizer)
			got, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			require.True(t, ok, "the second sync ends: %s", testenv.DescribeOperation(got))
			job, jobDesc := app.JobState(t, "db-migrate")
			r.Controller = fmt.Sprintf("operation %s; old hook Job %s", testenv.DescribeOperation(got), jobDesc)
			require.NotEqual(t, synccommon.OperationSucceeded, phase(got), testenv.DescribeOperation(got))
			require.Contains(t, got.Status.OperationState.Message+fmt.Sprint(got.Status.OperationState.SyncResult), "immutable")
			require.NotNil(t, job, "the failed hook Job is kept")
			held := slices.Contains(job.Finalizers, testenv.HookFinalizer)
			if version == testenv.ArgoCDV2 {
				require.True(t, held, "v2.14.21 never touches the hook finalizer: %s", jobDesc)
			} else {
				require.False(t, held, "v3.6.1 removes the leftover hook finalizer, which its cache held, when the second sync starts: %s", jobDesc)
				r.Controller += " (the leftover hook finalizer was removed by the controller during the second sync)"
			}

			// The rules, on the real state read through argocd-server: one finding for the Job.
			c := dialStack(t, stack)
			f := findingAbout(t, c, app, syncmedic.RuleHookImmutable, "db-migrate")
			require.Len(t, findingsAbout(scanApp(t, c, app), "db-migrate"), 1, "one finding for the Job")
			if held {
				require.Equal(t, "also ("+string(syncmedic.RuleHookFinalizerStuck)+")", f.Evidence[len(f.Evidence)-1].Field,
					"the hook-finalizer-stuck finding is folded into the one plan")
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
				require.Equal(t, "false", f.Remedy.Params[rules.ParamThenSync], "no sync that would fail the same way")
			} else {
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "without the finalizer: a person deletes the kept hook")
			}

			srv := startServe(t, app, autoPolicy)
			immutable := incident{rule: syncmedic.RuleHookImmutable, object: jobObject(app, "db-migrate")}
			root := announcedAbout(t, srv, immutable.rule, immutable.object, announceWithin)
			wantRemedies := 0
			if held {
				wantRemedies = 1
				require.True(t, app.WaitJob(t, "db-migrate", remedyWithin, func(j *batchv1.Job) bool {
					return j != nil && !slices.Contains(j.Finalizers, testenv.HookFinalizer)
				}), "the one remedy removes the hook finalizer: %s", srv.summary())
				require.Eventually(t, func() bool { return len(remedyResults(srv)) == 1 }, remedyWithin, tick,
					"the remedy's result is in the thread: %s", srv.summary())
			}
			// A quiet window several times every threshold: no second incident, no second remedy, no sync.
			more := waitFor(nearMissWindow, func() bool {
				return len(srv.roots()) > 1 || len(remediesApplied(srv)) > wantRemedies
			})
			_, jobAfter := app.JobState(t, "db-migrate")
			cur := app.Get(t)
			r.Syncmedic = fmt.Sprintf("%d incident(s): %s; the one plan chosen: %s; thread: %s; remedies applied: %d; Job then %s; operation then %s",
				len(srv.roots()), firstLine(root.Text), planOf(f), thread(srv, root), len(remediesApplied(srv)), jobAfter, testenv.DescribeOperation(cur))
			require.False(t, more, "one incident and at most one remedy for the Job: %s", srv.summary())
			require.Len(t, srv.roots(), 1, "one incident for the Job: %s", srv.summary())
			onlyAnnounced(t, srv, immutable)
			require.Len(t, remediesApplied(srv), wantRemedies, "one remedy sequence for the Job: %s", srv.summary())
			for _, m := range remedyResults(srv) {
				require.Contains(t, m, "`"+string(syncmedic.ActionRemoveHookFinalizer)+"` succeeded", "the remedy is the finalizer patch")
			}
			require.True(t, cur.Status.OperationState.StartedAt.Equal(&got.Status.OperationState.StartedAt),
				"syncmedic started no sync that would fail the same way: %s", testenv.DescribeOperation(cur))

			// The person deletes the kept hook through Argo CD and syncs: the real controller gets past it.
			app.DeleteJob(t, "db-migrate")
			require.True(t, app.WaitJob(t, "db-migrate", controllerWindow, func(j *batchv1.Job) bool { return j == nil }),
				"the old hook goes: no finalizer holds it")
			again := time.Now()
			app.Sync(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(again))
			r.Syncmedic += "; after the proposed delete-resource and a sync: " + testenv.DescribeOperation(after)
			require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the real controller syncs once the old hook is gone: %s",
				testenv.DescribeOperation(after))
		})
	}
}

// heldHookAutoPolicy is autoPolicy with argocd/hook-not-deleted reported after 5 s (it has no automatic remedy).
const heldHookAutoPolicy = `resolveAfter: 1
rules:
  argocd/hook-finalizer-stuck: {mode: auto, threshold: 3s}
  argocd/hook-completion-missed: {mode: auto, threshold: 30s, rerunHooks: true}
  argocd/hook-immutable: {mode: auto, rerunHooks: true}
  argocd/hook-not-deleted: {mode: notify, threshold: 5s}
` + routes

// Issue 13 item 7, the other shape on the real Argo CD: an old PreSync hook (default delete policy,
// BeforeHookCreation) that holds both argocd.argoproj.io/hook-finalizer — left by v2.14.3, played by the test — and
// another controller's finalizer. The second sync deletes it and waits for it to go: it matches hook-finalizer-stuck
// (automatic: remove the hook finalizer) and hook-not-deleted (the foreign finalizer; a person's call). One plan:
// syncmedic removes only the hook finalizer, once, and neither terminates nor re-syncs; what is left, the foreign
// finalizer, is reported afterwards on its own (notify). Once that controller lets go, the same operation creates
// the new hook and succeeds. v3.6.1 strips the hook finalizer from the old hook itself when the sync starts
// (gitops-engine #770): only hook-not-deleted remains there, and nothing is applied.
func TestAnOldHookHeldByTwoFinalizersGetsOnlyTheHookFinalizerRemoved(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV2, testenv.ArgoCDV3} {
		t.Run("on "+version+" an old hook held by the hook finalizer and another controller's gets one remedy and the rest is reported", func(t *testing.T) {
			t.Parallel()
			r := row(version, "one plan per object: old hook (BeforeHookCreation) held by the hook finalizer (left by an older release, played) and a foreign one, all hook rules auto")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app, start := testenv.ScenarioRealOldHookHeldBy(t, stack, testenv.HookFinalizer, testenv.ForeignFinalizer)
			require.True(t, app.WaitJob(t, "migrate", controllerWindow, func(j *batchv1.Job) bool {
				return j != nil && j.DeletionTimestamp != nil
			}), "the controller deletes the old hook before re-creating it")
			_, finished := app.WaitApp(t, nearMissWindow, completedSince(start))
			got := app.Get(t)
			job, jobDesc := app.JobState(t, "migrate")
			r.Controller = fmt.Sprintf("operation %s; old hook Job %s", testenv.DescribeOperation(got), jobDesc)
			require.False(t, finished, "the sync cannot finish while the old hook is held: %s", testenv.DescribeOperation(got))
			require.Equal(t, synccommon.OperationRunning, phase(got))
			require.NotNil(t, job)
			held := slices.Contains(job.Finalizers, testenv.HookFinalizer)
			if version == testenv.ArgoCDV2 {
				require.True(t, held, "v2.14.21 never touches the hook finalizer: %s", jobDesc)
			}

			c := dialStack(t, stack)
			wantRoots, wantRemedies := 1, 0
			var f syncmedic.Finding
			if held {
				wantRoots, wantRemedies = 2, 1
				f = findingAbout(t, c, app, syncmedic.RuleHookFinalizerStuck, "migrate")
				require.Len(t, findingsAbout(scanApp(t, c, app), "migrate"), 1, "one finding for the Job")
				require.Equal(t, "also ("+string(syncmedic.RuleHookNotDeleted)+")", f.Evidence[len(f.Evidence)-1].Field,
					"the hook-not-deleted finding is folded into the one plan")
				require.Equal(t, "false", f.Remedy.Params[rules.ParamThenSync], "removing the finalizer alone: nothing is terminated")
			} else {
				r.Controller += " (the hook finalizer was removed by the controller when the sync started)"
				f = findingAbout(t, c, app, syncmedic.RuleHookNotDeleted, "migrate")
				require.Len(t, findingsAbout(scanApp(t, c, app), "migrate"), 1, "one finding for the Job")
			}
			finalizerStuck := incident{rule: syncmedic.RuleHookFinalizerStuck, object: jobObject(app, "migrate")}
			notDeletedIncident := incident{rule: syncmedic.RuleHookNotDeleted, object: jobObject(app, "migrate")}

			srv := startServe(t, app, heldHookAutoPolicy)
			if held {
				require.Equal(t, finalizerStuck, announcementOf(rootFor(t, srv, syncmedic.RuleHookFinalizerStuck)), "hook-finalizer-stuck is about the old hook Job")
				onlyAnnounced(t, srv, finalizerStuck, notDeletedIncident)
				require.True(t, app.WaitJob(t, "migrate", remedyWithin, func(j *batchv1.Job) bool {
					return j != nil && !slices.Contains(j.Finalizers, testenv.HookFinalizer)
				}), "the one remedy removes the hook finalizer: %s", srv.summary())
			}
			notDeleted := rootFor(t, srv, syncmedic.RuleHookNotDeleted)
			require.Equal(t, notDeletedIncident, announcementOf(notDeleted), "hook-not-deleted is about the old hook Job")
			require.Contains(t, notDeleted.Blocks, testenv.ForeignFinalizer, "what is left is reported, naming the other finalizer")
			more := waitFor(nearMissWindow, func() bool {
				return len(srv.roots()) > wantRoots || len(remediesApplied(srv)) > wantRemedies
			})
			cur := app.Get(t)
			_, jobAfter := app.JobState(t, "migrate")
			r.Syncmedic = fmt.Sprintf("%d incident(s): %s; the one plan chosen: %s; remedies applied: %d (%s); Job then %s; operation then %s",
				len(srv.roots()), rootRules(srv), planOf(f), len(remediesApplied(srv)), strings.ReplaceAll(strings.Join(remedyResults(srv), " / "), "\n", " "), jobAfter, testenv.DescribeOperation(cur))
			require.False(t, more, "no further incident or remedy: %s", srv.summary())
			require.Len(t, srv.roots(), wantRoots, srv.summary())
			onlyAnnounced(t, srv, finalizerStuck, notDeletedIncident)
			if !held {
				onlyAnnounced(t, srv, notDeletedIncident)
			}
			require.Len(t, remediesApplied(srv), wantRemedies, srv.summary())
			if held {
				require.Less(t, indexOf(srv, remedyResults(srv)[0]), indexOf(srv, notDeleted.Text),
					"the foreign finalizer is reported on its own only after the one plan ran: %s", srv.summary())
			}
			require.Equal(t, synccommon.OperationRunning, phase(cur), "nothing was terminated: %s", testenv.DescribeOperation(cur))
			require.True(t, cur.Status.OperationState.StartedAt.Equal(&got.Status.OperationState.StartedAt), "still the same operation")

			// The other controller lets go: the same operation creates the new hook and succeeds.
			app.SetJobFinalizers(t, "migrate")
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			r.Syncmedic += "; once the other controller let go: " + testenv.DescribeOperation(after)
			require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the real controller finishes the same sync: %s", testenv.DescribeOperation(after))
			require.True(t, after.Status.OperationState.StartedAt.Equal(&got.Status.OperationState.StartedAt), "no new sync was needed")
		})
	}
}

// planOf describes the plan syncmedic chose for a finding: its rule, the remedy's action and whether a sync follows
// (with the findings folded into it), for a conformance row.
func planOf(f syncmedic.Finding) string {
	action := string(f.Remedy.Action)
	if f.Remedy.Action == syncmedic.ActionNone {
		action = "no automatic remedy (a person's call)"
	}
	s := fmt.Sprintf("%s → %s", f.Rule, action)
	if v, ok := f.Remedy.Params[rules.ParamThenSync]; ok {
		s += " (then sync: " + v + ")"
	}
	for _, e := range f.Evidence {
		if strings.HasPrefix(e.Field, "also (") {
			s += ", folding in " + strings.TrimSuffix(strings.TrimPrefix(e.Field, "also ("), ")")
		}
	}
	return s
}

// isRootOf reports whether root message m is an incident of rule: its Rule field (a link whose text is the rule ID),
// not evidence that merely mentions the rule (a finding folded into another's plan).
func isRootOf(m slackMessage, rule syncmedic.RuleID) bool {
	return strings.Contains(m.Blocks, "|"+string(rule))
}

// rootFor waits until Slack got the root message of an incident of rule, in the routed channel.
func rootFor(t *testing.T, srv *fakeSlack, rule syncmedic.RuleID) slackMessage {
	t.Helper()
	var root slackMessage
	require.Eventually(t, func() bool {
		for _, m := range srv.roots() {
			if isRootOf(m, rule) {
				root = m
				return true
			}
		}
		return false
	}, announceWithin, tick, "an incident of %s is announced (received: %s)", rule, srv.summary())
	require.Equal(t, routedChannel, root.Channel, "the policy's route picks the channel")
	return root
}

// rootRules lists the rule of each incident, in order.
func rootRules(srv *fakeSlack) string {
	var out []string
	for _, m := range srv.roots() {
		for _, rule := range []syncmedic.RuleID{syncmedic.RuleHookImmutable, syncmedic.RuleHookFinalizerStuck, syncmedic.RuleHookNotDeleted,
			syncmedic.RuleHookCompletionMissed, syncmedic.RuleOperationStuck} {
			if isRootOf(m, rule) {
				out = append(out, string(rule))
				break
			}
		}
	}
	return strings.Join(out, ", ")
}

// indexOf is the position of the first message whose text is text, in the order Slack received them (-1: none).
func indexOf(srv *fakeSlack, text string) int {
	for i, m := range srv.all() {
		if m.Text == text {
			return i
		}
	}
	return -1
}

// remediesApplied returns the thread replies that announce an applied remedy, across every thread.
func remediesApplied(srv *fakeSlack) []string {
	return threadReplies(srv, ":hammer_and_wrench: Applying")
}

// remedyResults returns the thread replies that report a remedy's result (not a dry run), across every thread.
func remedyResults(srv *fakeSlack) []string {
	return append(threadReplies(srv, ":white_check_mark:"), threadReplies(srv, ":x:")...)
}

func threadReplies(srv *fakeSlack, prefix string) []string {
	var out []string
	for _, m := range srv.all() {
		if m.Method == "chat.postMessage" && m.ThreadTS != "" && strings.HasPrefix(m.Text, prefix) {
			out = append(out, m.Text)
		}
	}
	return out
}
