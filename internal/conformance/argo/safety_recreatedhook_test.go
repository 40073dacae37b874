package argo

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/syncmedic/syncmedic"

	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Issue 26 item 5 on the real v3.6.1 controller and argocd-server: a hook re-created under the same name by a new
// sync keeps its finalizer when the remedy of an incident about the old hook runs afterwards.
//
// The old hook: a finished PreSync hook Job "migrate" holding argocd.argoproj.io/hook-finalizer with no operation
// running (left by a leaky 3.0.x before the upgrade, played as TestRemovingAHookFinalizerFollowsAFinalizerListThatMoved
// plays it: v3.6.1 itself neither leaks nor keeps it), found as argocd/hook-finalizer-stuck through the real
// argocd-server. Then a new sync starts: the controller removes the old hook's finalizer, deletes it
// (BeforeHookCreation) and creates the new "migrate" with the hook finalizer; its Pod runs until the test releases it.
//
// serve itself never gets there: it re-evaluates the application before acting, the old hook's finding is gone once
// the old Job is, and the remedy reads the application again before it patches. The state is reachable only when the
// new sync re-creates the hook between that read and the PatchResource call (milliseconds, not a window the
// controllers let a test hold open), so it is proven at the level below: the old finding's remedy run now (it sees the
// newer operation and changes nothing), the finding's patch sent to the real argocd-server (its test of the old UID
// fails), and the remedy with the application read before the new operation (its re-read finds a new object and
// leaves it). On ffc7976 the patch had no UID test and the remedy no re-read of the application: it removed the new
// hook's finalizer. The new hook's finalizer stays, and the sync completes.
func TestAReCreatedHookKeepsItsFinalizer(t *testing.T) {
	t.Parallel()
	env := argoEnv(t)
	version := testenv.ArgoCDV3
	ctx := context.Background()
	r := row(version, "remove-hook-finalizer of an old incident run after a new sync re-created the hook under the same name (finalizer left by a leaky 3.0.x, played)")
	stack := testenv.ArgoCDStack(t, env, testenv.ArgoCDStackOptions{Version: version})
	record(t, r)
	app := testenv.ScenarioRealHookWithLeftoverFinalizer(t, stack)
	c := dialStack(t, stack)
	f := findingAbout(t, c, app, syncmedic.RuleHookFinalizerStuck, "migrate")
	require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
	old, oldDesc := app.JobState(t, "migrate")
	require.NotNil(t, old, "the old hook is there: %s", oldDesc)
	oldUID := f.Remedy.Params[rules.ParamUID]
	require.Equal(t, string(old.UID), oldUID, "the finding names the old hook's UID")
	patch := f.Remedy.Params[rules.ParamPatch]
	require.Contains(t, patch, `{"op":"test","path":"/metadata/uid","value":"`+oldUID+`"}`, "the finding's patch tests the UID")

	// A new sync re-creates the hook under the same name; its Pod runs until released.
	app.Update(t, testenv.ConfigMapData{}, testenv.RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync,
		Image: "busybox:1.37", Run: testenv.PodRunsUntilReleased})
	start := time.Now()
	app.Sync(t)
	running, ok := app.WaitApp(t, remedyWithin, func(a *v1alpha1.Application) bool {
		return testenv.OperationRunningSince(start)(a) && testenv.HookResult(a, "migrate") == synccommon.OperationRunning
	})
	require.True(t, ok, "the new sync runs the re-created hook: %s", testenv.DescribeOperation(running))
	fresh, freshDesc := app.JobState(t, "migrate")
	require.NotNil(t, fresh, "the re-created hook is there")
	require.NotEqual(t, oldUID, string(fresh.UID), "a new object under the same name")
	require.Contains(t, fresh.Finalizers, testenv.HookFinalizer, "v3.6.1 creates the hook with the hook finalizer: %s", freshDesc)
	r.Controller = fmt.Sprintf("old hook %s found (uid %s); a new sync re-created it (uid %s, %s): %s",
		oldDesc, oldUID, fresh.UID, freshDesc, testenv.DescribeOperation(running))

	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c})
	require.NoError(t, err)
	out, err := rem.RemoveHookFinalizer(ctx, f, false)
	require.NoError(t, err, "steps: %v", out.Steps)
	require.False(t, out.Changed, "the old incident's remedy changes nothing: %v", out.Steps)
	require.Contains(t, strings.Join(out.Steps, " "), "newer operation", out.Steps)
	r.Syncmedic = "the old incident's remove-hook-finalizer now: " + strings.Join(out.Steps, "; ")

	_, perr := c.PatchResource(ctx, patchRequest(f, patch))
	require.Error(t, perr, "the finding's patch is refused: its test of the old UID fails")
	require.Equal(t, codes.InvalidArgument, status.Code(perr), "argocd-server returns the failed JSON-patch test as InvalidArgument: %v", perr)
	r.Syncmedic += fmt.Sprintf("; its patch sent to argocd-server: gRPC %s (%s)", status.Code(perr), firstLine(status.Convert(perr).Message()))

	// The remedy as it runs when the new sync re-creates the hook between its read of the application and its patch:
	// the finding's operation looks current (no startedAt to compare).
	racing := f
	racing.Remedy.Params = maps.Clone(f.Remedy.Params)
	delete(racing.Remedy.Params, rules.ParamOperationStartedAt)
	out, err = rem.RemoveHookFinalizer(ctx, racing, false)
	require.NoError(t, err, "steps: %v", out.Steps)
	require.False(t, out.Changed, "steps: %v", out.Steps)
	require.Contains(t, strings.Join(out.Steps, " "), "is a new object", out.Steps)
	r.Syncmedic += "; with the application read before the new sync: " + strings.Join(out.Steps, "; ")

	kept, keptDesc := app.JobState(t, "migrate")
	require.NotNil(t, kept, "the new hook is there")
	require.Equal(t, fresh.UID, kept.UID, "still the new hook")
	require.Contains(t, kept.Finalizers, testenv.HookFinalizer, "the new hook keeps its finalizer: %s", keptDesc)

	app.Release(t, "migrate")
	after, ok := app.WaitApp(t, remedyWithin, completedSince(start))
	r.Controller += fmt.Sprintf("; new hook after the three attempts: %s; once released: %s", keptDesc, testenv.DescribeOperation(after))
	require.True(t, ok, "the sync completes: %s", testenv.DescribeOperation(after))
	require.Equal(t, synccommon.OperationSucceeded, phase(after), testenv.DescribeOperation(after))
	require.True(t, after.Status.OperationState.StartedAt.Equal(&running.Status.OperationState.StartedAt), "the same operation")
}
