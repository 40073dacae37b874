package argo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// dialStack connects the argocd client syncmedic uses to the stack's argocd-server (admin token, plaintext).
func dialStack(t *testing.T, stack *testenv.RealArgoCD) *argocd.APIClient {
	t.Helper()
	token := filepath.Join(t.TempDir(), "argocd-token")
	require.NoError(t, os.WriteFile(token, []byte(stack.AdminToken(t)), 0o600))
	c, err := argocd.Dial(argocd.ClientOptions{ServerAddr: stack.Addr, PlainText: true, TokenFile: token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// scanApp evaluates app once through argocd-server, as `syncmedic scan` does, with the hook-finalizer and
// hook-deletion thresholds at zero (the other thresholds at their defaults).
func scanApp(t *testing.T, c argocd.Client, app *testenv.RealHookApp) []syncmedic.Finding {
	t.Helper()
	th := rules.DefaultThresholds()
	th.HookFinalizer, th.HookDeletion = time.Nanosecond, time.Nanosecond
	fs, problems, err := argocd.Scan(context.Background(), argocd.ScanOptions{Client: c, Selector: app.Selector(), Thresholds: th}, time.Now())
	require.NoError(t, err)
	require.Empty(t, problems)
	return fs
}

// findingAbout waits until a scan of app reports rule about Job name (the resource tree comes from the controller's
// cache and lags it), and returns that finding.
func findingAbout(t *testing.T, c argocd.Client, app *testenv.RealHookApp, rule syncmedic.RuleID, name string) syncmedic.Finding {
	t.Helper()
	var found syncmedic.Finding
	var last []syncmedic.Finding
	require.Eventually(t, func() bool {
		last = scanApp(t, c, app)
		for _, f := range last {
			if f.Rule == rule && f.Object.Kind == "Job" && f.Object.Name == name {
				found = f
				return true
			}
		}
		return false
	}, announceWithin, time.Second, "a scan through argocd-server reports %s about Job %s (last scan: %v)", rule, name, last)
	return found
}

// Issue 13 item 2 on the real Argo CD: a hook Job holding argocd.argoproj.io/hook-finalizer with no operation running
// is found through the real argocd-server; before the remedy runs, another controller puts its own finalizer in front
// of the hook finalizer, so the finding's JSON patch (test, then remove, at index 0) no longer fits. The real
// argocd-server returns the failed test as gRPC InvalidArgument; argocd/remove-hook-finalizer reads the Job again,
// removes the hook finalizer at its new index, leaves the other finalizer, and a second run is success with nothing
// changed. Afterwards the real controller syncs the app again: the old hook is deleted and re-created.
//
// Which real controller produces the held hook: v3.0.12 leaks it (a wave that fails to apply while its Sync hook runs;
// without a TTL the finished Job stays, complete, holding the finalizer). v2.14.21 never adds the hook finalizer
// (only v2.14.3 did in 2.x), and v3.6.1 neither leaks it on a failed wave nor keeps it on a finished hook
// (TestHookFinalizerLeakedByAFailedWave): on those two the test plays the older release that left it on a finished
// hook before the upgrade (v2.14.3; a leaky 3.0.x); argocd-server and the controller are the
// version's own.
func TestRemovingAHookFinalizerFollowsAFinalizerListThatMoved(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	cases := []struct {
		version, how, job string
		// held returns the app once a hook Job of name job holds the hook finalizer, with no operation running.
		held func(t *testing.T, stack *testenv.RealArgoCD) *testenv.RealHookApp
		// unblock puts right what made the hook hold the finalizer, before the next sync.
		unblock func(t *testing.T, app *testenv.RealHookApp)
	}{
		{
			version: testenv.ArgoCDV2, how: "hook finalizer left by v2.14.3 on a finished hook (played), found by v2.14.21", job: "migrate",
			held: func(t *testing.T, stack *testenv.RealArgoCD) *testenv.RealHookApp {
				return testenv.ScenarioRealHookWithLeftoverFinalizer(t, stack)
			},
			unblock: func(*testing.T, *testenv.RealHookApp) {},
		},
		{
			version: testenv.ArgoCDV3, how: "hook finalizer left on a finished hook by a leaky 3.0.x before the upgrade (played)", job: "migrate",
			held: func(t *testing.T, stack *testenv.RealArgoCD) *testenv.RealHookApp {
				return testenv.ScenarioRealHookWithLeftoverFinalizer(t, stack)
			},
			unblock: func(*testing.T, *testenv.RealHookApp) {},
		},
		{
			version: testenv.ArgoCDV3Leaky, how: "hook finalizer leaked on a kept hook by a wave that fails to apply", job: "report",
			held: func(t *testing.T, stack *testenv.RealArgoCD) *testenv.RealHookApp {
				app, start := testenv.ScenarioRealFailedWave(t, stack, testenv.KeptWaveHook)
				got, ok := app.WaitApp(t, remedyWithin, completedSince(start))
				require.True(t, ok, "the second sync ends: %s", testenv.DescribeOperation(got))
				require.Equal(t, synccommon.OperationFailed, phase(got), testenv.DescribeOperation(got))
				return app
			},
			unblock: func(t *testing.T, app *testenv.RealHookApp) {
				app.Update(t, testenv.ConfigMapData{}, testenv.KeptWaveHook)
			},
		},
	}
	for _, tc := range cases {
		t.Run("on "+tc.version+" the hook finalizer is removed at its new index after another finalizer moved it", func(t *testing.T) {
			t.Parallel()
			r := row(tc.version, "finalizer patch retry: another finalizer put in front of the hook finalizer ("+tc.how+")")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: tc.version})
			record(t, r)
			app := tc.held(t, stack)
			// Finished, and still holding the finalizer: no controller is going to remove it.
			finished := app.WaitJob(t, tc.job, controllerWindow, func(j *batchv1.Job) bool {
				_, desc := app.JobState(t, tc.job)
				return j == nil || strings.HasPrefix(desc, "Complete")
			})
			_, jobDesc := app.JobState(t, tc.job)
			require.True(t, finished, "the hook Job finishes: %s", jobDesc)
			require.Contains(t, jobDesc, testenv.HookFinalizer, "the finished hook Job still holds the hook finalizer")
			r.Controller = fmt.Sprintf("operation %s; hook Job %s", testenv.DescribeOperation(app.Get(t)), jobDesc)

			c := dialStack(t, stack)
			f := findingAbout(t, c, app, syncmedic.RuleHookFinalizerStuck, tc.job)
			require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
			stale := f.Remedy.Params[rules.ParamPatch]
			require.Contains(t, stale, `"path":"/metadata/finalizers/0"`, "found with the hook finalizer first")

			// Between the finding and the remedy, another controller puts its finalizer in front.
			app.SetJobFinalizers(t, tc.job, testenv.ForeignFinalizer, testenv.HookFinalizer)

			// What the real argocd-server answers to the finding's patch now: the test fails.
			_, perr := c.PatchResource(context.Background(), patchRequest(f, stale))
			require.Error(t, perr, "the stale patch's test fails")
			code := status.Code(perr)
			r.Controller += fmt.Sprintf("; a foreign finalizer put in front; the finding's patch then: gRPC %s (%s)", code, firstLine(status.Convert(perr).Message()))
			require.Equal(t, codes.InvalidArgument, code, "argocd-server returns the failed JSON-patch test (HTTP 422) as InvalidArgument: %v", perr)
			job, _ := app.JobState(t, tc.job)
			require.Equal(t, []string{testenv.ForeignFinalizer, testenv.HookFinalizer}, job.Finalizers, "a failed test changes nothing")

			rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c})
			require.NoError(t, err)
			out, err := rem.RemoveHookFinalizer(context.Background(), f, false)
			require.NoError(t, err, "steps: %v", out.Steps)
			require.True(t, out.Changed, "steps: %v", out.Steps)
			require.Contains(t, strings.Join(out.Steps, " "), "the finalizer list had changed", "re-read and patched again")
			job, jobDesc = app.JobState(t, tc.job)
			require.NotNil(t, job, "the Job is not being deleted: removing the finalizer does not delete it")
			require.Equal(t, []string{testenv.ForeignFinalizer}, job.Finalizers, "only the hook finalizer is removed")
			r.Syncmedic = fmt.Sprintf("remove-hook-finalizer: %s; Job then %s", strings.Join(out.Steps, "; "), jobDesc)

			again, err := rem.RemoveHookFinalizer(context.Background(), f, false)
			require.NoError(t, err, "a second run succeeds: %v", again.Steps)
			require.False(t, again.Changed, "a second run changes nothing: %v", again.Steps)
			r.Syncmedic += "; second run: " + strings.Join(again.Steps, "; ")
			require.Empty(t, findingsAbout(scanApp(t, c, app), tc.job), "nothing is reported about the hook any more")

			// Afterwards: the other controller lets go, and the real controller syncs again, deleting the old hook
			// (BeforeHookCreation) and creating the new one.
			app.SetJobFinalizers(t, tc.job)
			tc.unblock(t, app)
			start := time.Now()
			app.Sync(t)
			after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
			_, newJob := app.JobState(t, tc.job)
			r.Controller += fmt.Sprintf("; after the remedy (foreign finalizer released), next sync %s; hook Job %s", testenv.DescribeOperation(after), newJob)
			require.True(t, ok && phase(after) == synccommon.OperationSucceeded, "the real controller syncs past the old hook: %s", testenv.DescribeOperation(after))
		})
	}
}

// Issue 13 item 2's near miss on the real v3 controllers: a PreSync wave with a slow hook (its Pod running) and a fast
// hook Job deleted by its TTL at completion. v3 keeps the fast Job, deleting, under the hook finalizer until the wave
// ends — by design. With every hook rule on auto, syncmedic removes nothing while the operation that owns the hook
// runs and progresses; the real controller releases the Job itself once the slow hook exits.
func TestHookFinalizerIsNotRemovedWhileItsOperationProgresses(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	for _, version := range []string{testenv.ArgoCDV3Leaky, testenv.ArgoCDV3} {
		t.Run("on "+version+" a TTL-deleted hook held by the hook finalizer during its wave is left alone", func(t *testing.T) {
			t.Parallel()
			r := row(version, "near miss: hook finalizer on a TTL-deleted hook while its wave still runs (remedy on auto)")
			stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
			record(t, r)
			app := testenv.ScenarioRealSlowAndFastWave(t, stack)
			fast, fastDesc := app.JobState(t, "fast")
			// The phase only: the operation's message and hook results at this moment follow how far the controller's
			// pass had got ("Running" alone, or "waiting for completion of hook … and 2 more hooks" in another run).
			r.Controller = fmt.Sprintf("while the slow hook runs: operation %s; fast Job %s", phase(app.Get(t)), fastDesc)
			require.NotNil(t, fast, "the hook finalizer keeps the TTL-deleted fast Job while the wave runs: %s", fastDesc)
			require.Contains(t, fast.Finalizers, testenv.HookFinalizer)

			d := startServeDaemon(t, app, autoPolicy)
			srv := d.slack
			fired := nearMiss(t, d, app, r, autoThresholds+"; the fast hook finished before serve started", true)
			held, heldDesc := app.JobState(t, "fast")
			if !fired {
				r.Syncmedic += "; fast Job still " + heldDesc
			}
			require.False(t, fired, "nothing is reported while the wave runs: %s", srv.summary())
			require.NotNil(t, held, "the fast Job is still there: %s", heldDesc)
			require.Contains(t, held.Finalizers, testenv.HookFinalizer, "nothing removed the hook finalizer")

			app.Release(t, "slow")
			after, ok := app.WaitApp(t, remedyWithin, testenv.OperationCompleted)
			gone := app.WaitJob(t, "fast", remedyWithin, func(j *batchv1.Job) bool { return j == nil })
			r.Controller += fmt.Sprintf("; after the slow hook exits: %s; fast Job released by the controller: %v", testenv.DescribeOperation(after), gone)
			require.True(t, ok, "the sync finishes once the slow hook exits: %s", testenv.DescribeOperation(after))
			require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
			require.True(t, gone, "the real controller releases the fast Job once the wave ends")
			require.Empty(t, srv.roots(), "nothing was reported at any point: %s", srv.summary())
		})
	}
}

// patchRequest is the PatchResource request of a remove-hook-finalizer finding, with patch.
func patchRequest(f syncmedic.Finding, patch string) *applicationpkg.ApplicationResourcePatchRequest {
	p := f.Remedy.Params
	s := func(v string) *string { return &v }
	return &applicationpkg.ApplicationResourcePatchRequest{
		Name: s(f.Object.App), AppNamespace: s(f.Object.AppNamespace), Project: s(f.Object.Project),
		Namespace: s(p[rules.ParamNamespace]), ResourceName: s(p[rules.ParamName]), Version: s(p[rules.ParamVersion]),
		Group: s(p[rules.ParamGroup]), Kind: s(p[rules.ParamKind]), Patch: s(patch), PatchType: s(rules.JSONPatchType),
	}
}

// findingsAbout keeps the findings about Job name.
func findingsAbout(fs []syncmedic.Finding, name string) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, f := range fs {
		if f.Object.Kind == "Job" && f.Object.Name == name {
			out = append(out, f)
		}
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
