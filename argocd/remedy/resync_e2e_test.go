package remedy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// otherRevision is a commit other than testenv.Revision: a full SHA, so argocd-server resolves it without the
// repo-server, which the in-process harness does not run.
const otherRevision = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"

// resyncFinding is the remedy a stuck-operation rule reports for app (built here rather than by a rule: these tests
// are about what the remedy does through argocd-server, whatever the rule that asks for it).
func resyncFinding(a *v1alpha1.Application, action syncmedic.ActionID) syncmedic.Finding {
	return syncmedic.Finding{Fingerprint: "fp-" + a.Name, Remedy: syncmedic.Remedy{Action: action, Params: map[string]string{
		rules.ParamApp: a.Name, rules.ParamAppNamespace: a.Namespace, rules.ParamProject: a.Spec.Project,
		rules.ParamOperationStartedAt: a.Status.OperationState.StartedAt.UTC().Format(time.RFC3339),
	}}}
}

// createProject creates an AppProject that admits every repository and destination, with windows.
func createProject(t *testing.T, argo *testenv.ArgoCDServer, name string, windows v1alpha1.SyncWindows) {
	proj := &v1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argo.Namespace},
		Spec: v1alpha1.AppProjectSpec{SourceRepos: []string{"*"}, SyncWindows: windows,
			Destinations: []v1alpha1.ApplicationDestination{{Server: "*", Namespace: "*"}}}}
	require.NoError(t, argo.Env.Client.Create(context.Background(), proj))
}

// serverWindows waits until argocd-server's project informer has the application's project with its windows, and
// returns its GetApplicationSyncWindows answer.
func serverWindows(t *testing.T, c argocd.Client, a *v1alpha1.Application, n int) *application.ApplicationSyncWindowsResponse {
	var res *application.ApplicationSyncWindowsResponse
	require.Eventually(t, func() bool {
		var err error
		res, err = c.GetApplicationSyncWindows(context.Background(), &application.ApplicationSyncWindowsQuery{
			Name: &a.Name, AppNamespace: &a.Namespace, Project: &a.Spec.Project})
		return err == nil && len(res.AssignedWindows) == n
	}, 10*time.Second, 50*time.Millisecond)
	return res
}

func TestSyncWindowsAreJudgedAsForAnUnattendedSync(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	// The in-process argocd-server runs v2.14.21's code but its Version API says v99.99.99 (nothing stamps the
	// version in a test binary), which syncmedic takes as unknown; say v2.14.21, whose controller checks windows
	// before it handles a Terminating operation (v3.0.x to v3.5.x do too; v3.6.0 exempts Terminating).
	c := versionAs{APIClient: dial(t, argo.Addr, argo.AdminToken(t)), version: "v2.14.21+7ed2f2b"}
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond, StopTimeout: 30 * time.Second})
	require.NoError(t, err)
	// An allow window that opens twelve hours from now: inactive whenever the test runs.
	later := fmt.Sprintf("0 %d * * *", (time.Now().UTC().Hour()+12)%24)

	tests := []struct {
		name    string
		windows v1alpha1.SyncWindows
		// serverCanSync is argocd-server's own answer, CanSync(true): as for a person's manual sync.
		serverCanSync bool
		resyncs       bool
		// terminates says whether terminate-operation goes ahead: the v2.14.21 controller checks windows before it
		// handles Terminating, judging the (manual) operation as manual.
		terminates bool
		refusal    string
	}{
		{name: "a deny window", windows: v1alpha1.SyncWindows{{Kind: "deny", Schedule: "* * * * *", Duration: "1h", Applications: []string{"*"}}},
			refusal: "active deny window"},
		{name: "a deny window that allows manual syncs: argocd-server says CanSync, the unattended remedy does not resync",
			windows:       v1alpha1.SyncWindows{{Kind: "deny", Schedule: "* * * * *", Duration: "1h", Applications: []string{"*"}, ManualSync: true}},
			serverCanSync: true, terminates: true, refusal: "active deny window"},
		{name: "outside the project's only allow window, which allows manual syncs",
			windows:       v1alpha1.SyncWindows{{Kind: "allow", Schedule: later, Duration: "1h", Applications: []string{"*"}, ManualSync: true}},
			serverCanSync: true, terminates: true, refusal: "outside every allow window"},
		{name: "inside an allow window the remedy goes ahead (the near miss)",
			windows:       v1alpha1.SyncWindows{{Kind: "allow", Schedule: "* * * * *", Duration: "1h", Applications: []string{"*"}}},
			serverCanSync: true, resyncs: true, terminates: true},
	}
	for i, tt := range tests {
		for _, action := range []syncmedic.ActionID{syncmedic.ActionTerminateAndResync, syncmedic.ActionTerminateOperation} {
			t.Run(tt.name+"/"+string(action), func(t *testing.T) {
				name := fmt.Sprintf("win-%d-%d", i, len(action))
				createProject(t, argo, name, tt.windows)
				ns := env.Namespace(t)
				a := argo.NewApplication(name, ns)
				a.Spec.Project = name
				argo.CreateApplication(t, a)
				// hand-written state: an operation Running, waiting for a hook, started by a person (not auto-sync).
				// The in-process argocd-server runs no application-controller; the real v2.14.21 controller loses a
				// hook under a deny window in internal/conformance/argo TestSyncWindowHoldsTheTerminateOfALostHook.
				argo.SetOperationState(t, name, waitingOp("waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning, ns))
				a, err := getApp(argo, name)
				require.NoError(t, err)
				res := serverWindows(t, c, a, 1)
				require.Equal(t, tt.serverCanSync, res.GetCanSync(), "argocd-server's answer, as for a manual sync")
				ops := argo.CountOperations(t, name)
				goesAhead := tt.resyncs
				if action == syncmedic.ActionTerminateOperation {
					goesAhead = tt.terminates
				}
				if goesAhead {
					// hand-written state: see playController.
					playController(t, argo, name, nil)
				}

				out, err := rem.Remediers()[action].Remediate(context.Background(), resyncFinding(a, action), false)
				if goesAhead {
					require.NoError(t, err, "steps: %v", out.Steps)
					require.True(t, out.Changed)
					wantSyncs := 0
					if action == syncmedic.ActionTerminateAndResync {
						wantSyncs = 1
					}
					waitCounts(t, ops, 1, wantSyncs)
					return
				}
				term, syncs := ops.Counts()
				require.Error(t, err)
				require.False(t, syncmedic.IsPermanent(err), "retried after the window: %v", err)
				require.ErrorContains(t, err, tt.refusal)
				require.False(t, out.Changed)
				after, err := getApp(argo, name)
				require.NoError(t, err)
				require.Equal(t, synccommon.OperationRunning, after.Status.OperationState.Phase, "the operation was left running")
				require.Zero(t, term, "nothing was terminated")
				require.Zero(t, syncs, "nothing was synced")
			})
		}
	}
}

func TestResyncOfAMultiSourceAutoSyncedAppIsAccepted(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	c := dial(t, argo.Addr, argo.AdminToken(t))
	ns := env.Namespace(t)
	name := "multi"
	a := argo.NewApplication(name, ns)
	src := *a.Spec.Source
	a.Spec.Source = nil
	a.Spec.Sources = v1alpha1.ApplicationSources{src, src}
	a.Spec.Sources[1].Path = "overlay"
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}}
	argo.CreateApplication(t, a)
	// A Sync naming those Revisions is refused from v3.3.0 (FailedPrecondition "Cannot sync source … auto-sync
	// currently set to …", v3.6.1 server/application/application.go ~2248). v2.14.21 to v3.2.11 have the same check
	// but it never fires (resolveSourceRevisions writes the requested revisions into the slice GetSources returns,
	// then compares the slice with itself): they accept the request and sync the old commits, what auto-sync would
	// never do. Named no revision, every version syncs the sources' targetRevisions.
	op := waitingOp("waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning, ns)
	op.Operation.Sync.Revision, op.Operation.Sync.Revisions = "", []string{otherRevision, otherRevision}
	op.Operation.Sync.Sources = a.Spec.Sources
	op.Operation.InitiatedBy = v1alpha1.OperationInitiator{Automated: true}
	// hand-written state: an auto-sync operation of an earlier commit (its Revisions, as the server resolved them
	// then), Running and waiting for a hook, while the sources now pin testenv.Revision. The in-process
	// argocd-server runs no application-controller; what matters here is the Sync request argocd-server gets.
	argo.SetOperationState(t, name, op)
	a, err := getApp(argo, name)
	require.NoError(t, err)

	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond, StopTimeout: 30 * time.Second})
	require.NoError(t, err)
	ops := argo.CountOperations(t, name)
	// hand-written state: see playController.
	playController(t, argo, name, nil)
	out, err := rem.Remediers()[syncmedic.ActionTerminateAndResync].Remediate(context.Background(), resyncFinding(a, syncmedic.ActionTerminateAndResync), false)
	require.NoError(t, err, "steps: %v", out.Steps)
	waitCounts(t, ops, 1, 1)
	after, err := getApp(argo, name)
	require.NoError(t, err)
	require.NotNil(t, after.Operation)
	require.Equal(t, []string{testenv.Revision, testenv.Revision}, after.Operation.Sync.Revisions, "the sources' targetRevisions, as auto-sync would sync")
}

// versionAs reports another server version than the in-process argocd-server's, for the checks that depend on it.
type versionAs struct {
	*argocd.APIClient
	version string
}

func (v versionAs) Version(context.Context, *emptypb.Empty, ...grpc.CallOption) (*versionpkg.VersionMessage, error) {
	return &versionpkg.VersionMessage{Version: v.version}, nil
}

func TestResyncNamingARevisionAsksCanIForOverride(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"resyncer", "overrider"},
		Policy: []string{
			"p, role:resyncer, applications, get, */*, allow", "p, role:resyncer, applications, sync, */*, allow",
			"g, resyncer, role:resyncer",
			"p, role:overrider, applications, get, */*, allow", "p, role:overrider, applications, sync, */*, allow",
			"p, role:overrider, applications, override, */*, allow", "g, overrider, role:overrider",
		},
	})
	tests := []struct {
		account    string
		terminates bool
	}{
		{"resyncer", false},
		{"overrider", true},
	}
	for _, tt := range tests {
		t.Run(tt.account, func(t *testing.T) {
			ns := env.Namespace(t)
			name := "pinned-" + tt.account
			argo.CreateApplication(t, argo.NewApplication(name, ns))
			// hand-written state: a person's sync to another commit than the targetRevision (argocd app sync
			// --revision), Running and waiting for a hook; the in-process argocd-server runs no
			// application-controller, and the test is about the RBAC question asked before the terminate.
			op := waitingOp("waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning, ns)
			op.Operation.Sync.Revision = otherRevision
			argo.SetOperationState(t, name, op)
			a, err := getApp(argo, name)
			require.NoError(t, err)
			// The in-process server is v2.14.21, which has no application.sync.requireOverridePrivilegeForRevisionSync
			// (v3.2.0 adds it; with it set, v3.2+ refuses this Sync without `applications, override`). Reporting
			// v3.2.11 makes syncmedic ask the real server's CanI, which answers from argocd-rbac-cm as v3 does.
			c := versionAs{APIClient: dial(t, argo.Addr, argo.Token(t, tt.account)), version: "v3.2.11+8a0b2c1"}
			rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond, StopTimeout: 30 * time.Second})
			require.NoError(t, err)
			ops := argo.CountOperations(t, name)
			if tt.terminates {
				// hand-written state: see playController.
				playController(t, argo, name, nil)
			}
			out, err := rem.Remediers()[syncmedic.ActionTerminateAndResync].Remediate(context.Background(), resyncFinding(a, syncmedic.ActionTerminateAndResync), false)
			if tt.terminates {
				require.NoError(t, err, "steps: %v", out.Steps)
				waitCounts(t, ops, 1, 1)
				after, err := getApp(argo, name)
				require.NoError(t, err)
				require.Equal(t, otherRevision, after.Operation.Sync.Revision, "the same revision")
				return
			}
			require.Error(t, err)
			require.True(t, syncmedic.IsPermanent(err), "%v", err)
			require.ErrorContains(t, err, "applications, override, default/")
			term, syncs := ops.Counts()
			require.Zero(t, term, "nothing was terminated")
			require.Zero(t, syncs, "nothing was synced")
		})
	}
}

func TestResyncStopsWhenArgoCDSaysNoOperationWhileTheStateRuns(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	c := dial(t, argo.Addr, argo.AdminToken(t))
	ns := env.Namespace(t)
	name := "orphaned-op"
	argo.CreateApplication(t, argo.NewApplication(name, ns))
	// hand-written state: status.operationState Running while .operation is empty (argo-cd #17155, #18613, #23765:
	// reported after controller restarts and lost updates, which no controller here reproduces on demand).
	argo.SetOperationState(t, name, waitingOp("waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning, ns))
	// hand-written state: the same; .operation cleared as in those reports.
	argo.UpdateApplication(t, name, func(a *v1alpha1.Application) { a.Operation = nil })
	a, err := getApp(argo, name)
	require.NoError(t, err)
	ops := argo.CountOperations(t, name)
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond, StopTimeout: time.Minute})
	require.NoError(t, err)

	start := time.Now()
	out, err := rem.Remediers()[syncmedic.ActionTerminateAndResync].Remediate(context.Background(), resyncFinding(a, syncmedic.ActionTerminateAndResync), false)
	require.Error(t, err)
	require.True(t, syncmedic.IsPermanent(err), "%v", err)
	require.ErrorContains(t, err, "No operation is in progress")
	require.ErrorContains(t, err, "status.operationState says Running")
	require.Less(t, time.Since(start), 30*time.Second, "no wait for a stop that cannot come (StopTimeout is a minute)")
	require.False(t, out.Changed)
	term, syncs := ops.Counts()
	require.Zero(t, term)
	require.Zero(t, syncs, "nothing was synced over it")
	after, err := getApp(argo, name)
	require.NoError(t, err)
	require.Nil(t, after.Operation)
	require.Equal(t, synccommon.OperationRunning, after.Status.OperationState.Phase)
}

func TestFinalizerPatchLeavesAHookRecreatedUnderTheSameNameAlone(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	c := dial(t, argo.Addr, argo.AdminToken(t))
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	ns := env.Namespace(t)
	app := "recreated"
	argo.CreateApplication(t, argo.NewApplication(app, ns))
	// hand-written state: see heldHook.
	old := heldHook(t, argo, app, ns, keepFinalizer, rules.HookFinalizer)
	f := finalizerFinding(t, argo, app, old)
	require.Contains(t, f.Remedy.Params[rules.ParamPatch], `"path":"/metadata/uid","value":"`+string(old.UID)+`"`)

	// The old hook goes away and a new sync creates the hook again under the same name; on v3 gitops-engine adds
	// the hook finalizer at creation, here at the same index the finding's patch tests.
	setFinalizers(t, env, old)
	require.Eventually(t, func() bool { return jobGone(argo, ns, old.Name) }, 10*time.Second, 20*time.Millisecond)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: ns, Finalizers: []string{keepFinalizer, rules.HookFinalizer},
			Labels: old.Labels, Annotations: old.Annotations},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "migrate:2"}}}}},
	}
	require.NoError(t, env.Client.Create(context.Background(), job))
	job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	// hand-written state: the new hook in the controller's cache (no application-controller runs here).
	argo.SetResources(t, app, job)

	out, err := rem.Remediers()[syncmedic.ActionRemoveHookFinalizer].Remediate(context.Background(), f, false)
	require.NoError(t, err, "steps: %v", out.Steps)
	require.False(t, out.Changed, "steps: %v", out.Steps)
	require.Contains(t, out.Steps[0], "is a new object")
	cur := &batchv1.Job{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur))
	require.Equal(t, []string{keepFinalizer, rules.HookFinalizer}, cur.Finalizers, "the running hook keeps its finalizer")
	require.Nil(t, cur.DeletionTimestamp)
}

// waitCounts waits until the operation counter (which follows the apiserver's watch) has seen terminations and
// syncs, and checks that it saw no more.
func waitCounts(t *testing.T, ops *testenv.OperationCounter, terminations, syncs int) {
	t.Helper()
	require.Eventually(t, func() bool {
		term, s := ops.Counts()
		return term >= terminations && s >= syncs
	}, 10*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // a second termination or sync would show by now
	term, s := ops.Counts()
	require.Equal(t, terminations, term, "terminations")
	require.Equal(t, syncs, s, "syncs")
}
