package remedy

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	versionpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/version"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// fakeRemedyArgo stands in for argocd-server in unit tests of the remedies: Get answers app, the sync windows and
// the version are fixed, CanI answers canI (nil: the fake has no CanI), and every mutating call is recorded.
// Calls the remedies must not make are left to the nil embedded Client and would panic.
type fakeRemedyArgo struct {
	argocd.Client
	mu        sync.Mutex
	app       *v1alpha1.Application
	version   string
	windows   *application.ApplicationSyncWindowsResponse
	terminate error
	// onTerminate, when set, runs when TerminateOperation is called (before it answers terminate); afterTerminate
	// runs after an accepted TerminateOperation ended the operation.
	onTerminate, afterTerminate func(*fakeRemedyArgo)
	syncErr                     error
	patchErr                    error
	live                        string // GetResource's manifest
	canI                        map[string]string
	calls                       []string
	terminated                  int
	syncs                       []*application.ApplicationSyncRequest
	patches                     []string
}

func (f *fakeRemedyArgo) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeRemedyArgo) Get(context.Context, *application.ApplicationQuery, ...grpc.CallOption) (*v1alpha1.Application, error) {
	f.record("Get")
	return f.app.DeepCopy(), nil
}

func (f *fakeRemedyArgo) Version(context.Context, *emptypb.Empty, ...grpc.CallOption) (*versionpkg.VersionMessage, error) {
	f.record("Version")
	return &versionpkg.VersionMessage{Version: f.version}, nil
}

func (f *fakeRemedyArgo) GetApplicationSyncWindows(context.Context, *application.ApplicationSyncWindowsQuery, ...grpc.CallOption) (*application.ApplicationSyncWindowsResponse, error) {
	f.record("GetApplicationSyncWindows")
	if f.windows == nil {
		return &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true)}, nil
	}
	return f.windows, nil
}

func (f *fakeRemedyArgo) TerminateOperation(context.Context, *application.OperationTerminateRequest, ...grpc.CallOption) (*application.OperationTerminateResponse, error) {
	f.record("TerminateOperation")
	if f.onTerminate != nil {
		f.onTerminate(f)
	}
	if f.terminate != nil {
		return nil, f.terminate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated++
	// What the controller does next: the operation ends terminated.
	st := f.app.Status.OperationState
	st.Phase, st.Message = synccommon.OperationFailed, "Operation terminated"
	f.app.Operation = nil
	if f.afterTerminate != nil {
		f.afterTerminate(f)
	}
	return &application.OperationTerminateResponse{}, nil
}

func (f *fakeRemedyArgo) Watch(ctx context.Context, _ *application.ApplicationQuery, _ ...grpc.CallOption) (application.ApplicationService_WatchClient, error) {
	f.record("Watch")
	return &appStream{ctx: ctx, app: f.app.DeepCopy()}, nil
}

func (f *fakeRemedyArgo) Sync(_ context.Context, req *application.ApplicationSyncRequest, _ ...grpc.CallOption) (*v1alpha1.Application, error) {
	f.record("Sync")
	if f.syncErr != nil {
		return nil, f.syncErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs = append(f.syncs, req)
	return f.app, nil
}

func (f *fakeRemedyArgo) PatchResource(_ context.Context, req *application.ApplicationResourcePatchRequest, _ ...grpc.CallOption) (*application.ApplicationResourceResponse, error) {
	f.record("PatchResource")
	f.mu.Lock()
	f.patches = append(f.patches, req.GetPatch())
	f.mu.Unlock()
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	return &application.ApplicationResourceResponse{}, nil
}

func (f *fakeRemedyArgo) GetResource(context.Context, *application.ApplicationResourceRequest, ...grpc.CallOption) (*application.ApplicationResourceResponse, error) {
	f.record("GetResource")
	return &application.ApplicationResourceResponse{Manifest: &f.live}, nil
}

// withCanI is the fake with an AccountService CanI answering answers by "action object" ("no" when absent).
type withCanI struct {
	*fakeRemedyArgo
}

func (f withCanI) CanI(_ context.Context, in *accountpkg.CanIRequest, _ ...grpc.CallOption) (*accountpkg.CanIResponse, error) {
	f.record("CanI " + in.Action + " " + in.Subresource)
	v := f.canI[in.Action+" "+in.Subresource]
	if v == "" {
		v = "no"
	}
	return &accountpkg.CanIResponse{Value: v}, nil
}

// appStream sends the application once, then waits for the context.
type appStream struct {
	grpc.ClientStream
	ctx  context.Context
	app  *v1alpha1.Application
	sent bool
}

func (s *appStream) Recv() (*v1alpha1.ApplicationWatchEvent, error) {
	if !s.sent {
		s.sent = true
		return &v1alpha1.ApplicationWatchEvent{Application: *s.app}, nil
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

func boolPtr(b bool) *bool { return &b }

func window(kind, schedule string, manual bool) *application.ApplicationSyncWindow {
	return &application.ApplicationSyncWindow{Kind: strPtr(kind), Schedule: strPtr(schedule), Duration: strPtr("1h"), ManualSync: boolPtr(manual)}
}

func newTestRemedies(t *testing.T, c argocd.Client) *Remedies {
	r, err := NewRemedies(RemedierOptions{Client: c, RetryBackoff: time.Millisecond, SyncAttempts: 2, StopTimeout: 300 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return r
}

// stuckFinding is what hook-completion-missed reports about app: terminate-and-resync of its running operation.
func stuckFinding(a *v1alpha1.Application) syncmedic.Finding {
	return syncmedic.Finding{Fingerprint: "fp", Remedy: syncmedic.Remedy{Action: syncmedic.ActionTerminateAndResync, Params: map[string]string{
		rules.ParamApp: a.Name, rules.ParamAppNamespace: a.Namespace, rules.ParamProject: a.Spec.Project,
		rules.ParamOperationStartedAt: a.Status.OperationState.StartedAt.UTC().Format(time.RFC3339),
	}}}
}

// hand-written state: the remedies' unit tests build the application in memory (nothing is written to an
// apiserver); runningOp is the operation hook-completion-missed reports, produced by the real controllers in
// internal/conformance/argo.
func stuckApp() *v1alpha1.Application {
	return app(runningOp(time.Hour, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning))
}

func TestResyncEvaluatesSyncWindowsAsAnUnattendedSync(t *testing.T) {
	tests := []struct {
		name    string
		windows *application.ApplicationSyncWindowsResponse
		allowed bool
		why     string
	}{
		{
			// argocd-server answers CanSync true: it asks as for a manual sync (CanSync(true)).
			name: "an active deny window that allows manual syncs blocks the unattended remedy",
			windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
				ActiveWindows: []*application.ApplicationSyncWindow{window("deny", "0 22 * * *", true)}, AssignedWindows: []*application.ApplicationSyncWindow{window("deny", "0 22 * * *", true)}},
			why: `active deny window deny "0 22 * * *" for 1h (manualSync)`,
		},
		{
			name: "outside its only allow window, which allows manual syncs, the project blocks the unattended remedy",
			windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
				AssignedWindows: []*application.ApplicationSyncWindow{window("allow", "0 2 * * *", true)}},
			why: "outside every allow window",
		},
		{
			name: "outside its allow window without manualSync the project blocks it too",
			windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(false),
				AssignedWindows: []*application.ApplicationSyncWindow{window("allow", "0 2 * * *", false)}},
			why: "outside every allow window",
		},
		{
			name: "inside an active allow window the remedy goes ahead",
			windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
				ActiveWindows:   []*application.ApplicationSyncWindow{window("allow", "* * * * *", false)},
				AssignedWindows: []*application.ApplicationSyncWindow{window("allow", "* * * * *", false), window("allow", "0 2 * * *", false)}},
			allowed: true,
		},
		{
			name: "an inactive deny window does not block",
			windows: &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
				AssignedWindows: []*application.ApplicationSyncWindow{window("deny", "0 22 * * *", false)}},
			allowed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			fake := &fakeRemedyArgo{app: a, version: "v2.14.21+7ed2f2b", windows: tt.windows}
			out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), stuckFinding(a), false)
			if tt.allowed {
				require.NoError(t, err, "steps: %v", out.Steps)
				require.Equal(t, 1, fake.terminated)
				require.Len(t, fake.syncs, 1)
				return
			}
			require.Error(t, err)
			require.False(t, syncmedic.IsPermanent(err), "retried after the window: %v", err)
			require.ErrorContains(t, err, "blocks unattended syncs now")
			require.ErrorContains(t, err, tt.why)
			require.False(t, out.Changed)
			require.Zero(t, fake.terminated, "nothing was terminated")
			require.Empty(t, fake.syncs, "nothing was synced")
		})
	}
}

func TestTerminateOperationFollowsTheServersWindowHandling(t *testing.T) {
	deny := &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(false),
		ActiveWindows:   []*application.ApplicationSyncWindow{window("deny", "* * * * *", false)},
		AssignedWindows: []*application.ApplicationSyncWindow{window("deny", "* * * * *", false)}}
	manualDeny := &application.ApplicationSyncWindowsResponse{CanSync: boolPtr(true),
		ActiveWindows:   []*application.ApplicationSyncWindow{window("deny", "* * * * *", true)},
		AssignedWindows: []*application.ApplicationSyncWindow{window("deny", "* * * * *", true)}}
	tests := []struct {
		name       string
		version    string
		windows    *application.ApplicationSyncWindowsResponse
		automated  bool
		terminates bool
	}{
		{"v2.14.21 leaves a terminated operation Terminating under a deny window: not terminated", "v2.14.21+7ed2f2b", deny, false, false},
		{"v3.0.12 does the same", "v3.0.12", deny, false, false},
		{"v3.5.0 still does", "v3.5.0", deny, false, false},
		{"an unknown version counts as blocking", "", deny, false, false},
		{"v3.6.1 handles Terminating under a window: terminated", "v3.6.1+1a2b3c4", deny, false, true},
		{"a manualSync deny window lets the controller terminate a manually started operation", "v2.14.21", manualDeny, false, true},
		{"but not an operation auto-sync started (argo-cd #25361)", "v2.14.21", manualDeny, true, false},
		{"no window: terminated", "v2.14.21", nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			a.Status.OperationState.Operation.InitiatedBy.Automated = tt.automated
			fake := &fakeRemedyArgo{app: a, version: tt.version, windows: tt.windows}
			f := stuckFinding(a)
			f.Remedy.Action = syncmedic.ActionTerminateOperation
			out, err := newTestRemedies(t, fake).TerminateOperation(context.Background(), f, false)
			if tt.terminates {
				require.NoError(t, err, "steps: %v", out.Steps)
				require.Equal(t, 1, fake.terminated)
				return
			}
			require.Error(t, err)
			require.False(t, syncmedic.IsPermanent(err), "retried after the window: %v", err)
			require.ErrorContains(t, err, "does not process a Terminating operation while a window blocks it")
			require.Zero(t, fake.terminated, "nothing was terminated")
		})
	}
}

func TestResyncOfAMultiSourceAutoSyncedApp(t *testing.T) {
	a := stuckApp()
	a.Spec.Sources = v1alpha1.ApplicationSources{{RepoURL: "https://git/a.git", TargetRevision: "main"}, {RepoURL: "https://git/b.git", TargetRevision: "main"}}
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}}
	so := a.Status.OperationState.Operation.Sync
	so.Revision, so.Revisions = "", []string{"4f2c1e9aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "9a8b7c6bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}

	t.Run("the sync names no revision: the server refuses the resolved ones for an auto-synced app", func(t *testing.T) {
		fake := &fakeRemedyArgo{app: a.DeepCopy(), version: "v2.14.21"}
		out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), stuckFinding(a), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Len(t, fake.syncs, 1)
		require.Empty(t, fake.syncs[0].Revisions)
		require.Empty(t, fake.syncs[0].SourcePositions)
		require.Empty(t, fake.syncs[0].GetRevision())
	})
	t.Run("the server's refusal is permanent, not retried ten times", func(t *testing.T) {
		refusal := status.Error(codes.FailedPrecondition, "Cannot sync source https://git/a.git to 4f2c1e9: auto-sync currently set to main")
		fake := &fakeRemedyArgo{app: a.DeepCopy(), version: "v2.14.21", syncErr: refusal}
		_, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), stuckFinding(a), false)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err), "%v", err)
		var syncCalls int
		for _, c := range fake.calls {
			if c == "Sync" {
				syncCalls++
			}
		}
		require.Equal(t, 1, syncCalls)
	})
}

func TestResyncNamingARevisionNeedsOverrideOnV32(t *testing.T) {
	tests := []struct {
		name       string
		version    string
		canI       map[string]string
		noCanI     bool
		automated  bool
		terminates bool
		permanent  bool
		asked      bool
	}{
		{name: "v3.2.11, the account lacks override: nothing terminated", version: "v3.2.11", asked: true, permanent: true},
		{name: "v3.6.1, the account has override on both object forms: terminated and synced", version: "v3.6.1",
			canI: map[string]string{"override default/shop": "yes", "override default/argocd/shop": "yes"}, asked: true, terminates: true},
		{name: "override on the short form only is not enough", version: "v3.6.1",
			canI: map[string]string{"override default/shop": "yes"}, asked: true, permanent: true},
		{name: "an unknown version is asked about too", version: "", asked: true, permanent: true},
		{name: "v3.2.11 without a CanI client: not terminated, retryable", version: "v3.2.11", noCanI: true},
		{name: "v3.0.12 has no such setting: not asked", version: "v3.0.12", terminates: true},
		{name: "v2.14.21 neither", version: "v2.14.21+7ed2f2b", terminates: true},
		{name: "an auto-synced app names no revision: not asked", version: "v3.6.1", automated: true, terminates: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			a.Spec.Source = &v1alpha1.ApplicationSource{RepoURL: "https://git/a.git", TargetRevision: "main"}
			if tt.automated {
				a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}}
			}
			fake := &fakeRemedyArgo{app: a, version: tt.version, canI: tt.canI}
			var c argocd.Client = withCanI{fake}
			if tt.noCanI {
				c = fake
			}
			out, err := newTestRemedies(t, c).TerminateAndResync(context.Background(), stuckFinding(a), false)
			asked := false
			for _, call := range fake.calls {
				asked = asked || call == "CanI override default/shop"
			}
			require.Equal(t, tt.asked, asked, "calls: %v", fake.calls)
			if tt.terminates {
				require.NoError(t, err, "steps: %v", out.Steps)
				require.Equal(t, 1, fake.terminated)
				require.Len(t, fake.syncs, 1)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.permanent, syncmedic.IsPermanent(err), "%v", err)
			if tt.permanent {
				require.ErrorContains(t, err, "p, role:syncmedic, applications, override, default/")
			}
			require.Zero(t, fake.terminated, "nothing was terminated")
			require.Empty(t, fake.syncs, "nothing was synced")
		})
	}
}

func TestResyncStopsWhenTheServerSaysNoOperationWhileTheStateRuns(t *testing.T) {
	noOp := status.Error(codes.InvalidArgument, "Unable to terminate operation. No operation is in progress")
	t.Run("operation cleared, state still Running: a permanent error at once, no wait, no sync", func(t *testing.T) {
		a := stuckApp()
		a.Operation = nil // hand-written state: argo-cd #17155, #23765 (the controller lost the operation)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21", terminate: noOp}
		out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), stuckFinding(a), false)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err), "%v", err)
		require.ErrorContains(t, err, "#17155")
		require.ErrorContains(t, err, "status.operationState says Running")
		require.NotContains(t, fake.calls, "Watch", "no wait for a stop that cannot come")
		require.Empty(t, fake.syncs)
		require.False(t, out.Changed)
	})
	t.Run("the operation finished by itself meanwhile: nothing terminated, nothing synced", func(t *testing.T) {
		a := stuckApp()
		finding := stuckFinding(a)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21", terminate: noOp, onTerminate: func(f *fakeRemedyArgo) {
			// The controller finished the operation between the remedy's read and its TerminateOperation.
			f.app.Status.OperationState.Phase, f.app.Operation = synccommon.OperationFailed, nil
		}}
		out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), finding, false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Empty(t, fake.syncs, "an operation that ended by itself is not synced again")
		require.False(t, out.Changed)
		require.Equal(t, "app=argocd/shop: the operation stopped by itself before syncmedic terminated it: not syncing again", out.Steps[len(out.Steps)-1])
	})
}

func TestResyncNeverSyncsAnOperationThatEndedByItself(t *testing.T) {
	ended := func(phase synccommon.OperationPhase, msg string) func(*v1alpha1.Application) {
		return func(a *v1alpha1.Application) {
			// hand-written state: the operation runningOp describes, as the controller ends it.
			a.Status.OperationState.Phase, a.Status.OperationState.Message = phase, msg
			a.Status.OperationState.FinishedAt = ago(time.Minute)
			a.Operation = nil
		}
	}
	tests := []struct {
		name string
		end  func(*v1alpha1.Application)
		want string
	}{
		{"it succeeded", ended(synccommon.OperationSucceeded, "successfully synced (all tasks run)"),
			"the operation this plan was for (app=argocd/shop, started at 2026-03-10T11:00:00Z) ended at 2026-03-10T11:59:00Z (phase Succeeded: successfully synced (all tasks run)); nothing to fix: not syncing again"},
		{"it failed", ended(synccommon.OperationFailed, "one or more synchronization tasks completed unsuccessfully"),
			"the operation this plan was for (app=argocd/shop, started at 2026-03-10T11:00:00Z) ended at 2026-03-10T11:59:00Z (phase Failed: one or more synchronization tasks completed unsuccessfully); nothing to fix: not syncing again"},
		{"someone else terminates it", func(a *v1alpha1.Application) {
			a.Status.OperationState.Phase, a.Status.OperationState.Message = synccommon.OperationTerminating, "terminating"
		}, "the operation of app=argocd/shop started at 2026-03-10T11:00:00Z is being terminated by someone else (terminating): not syncing over their decision; nothing to fix: not syncing again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stuckApp()
			finding := stuckFinding(a)
			tt.end(a)
			fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
			out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), finding, false)
			require.NoError(t, err, "an outcome, not an error that retries")
			require.Equal(t, []string{tt.want}, out.Steps)
			require.False(t, out.Changed)
			require.Equal(t, []string{"Get"}, fake.calls, "nothing but the read")
		})
	}
	t.Run("the dry run names the operation it is for, and is refused once it ended", func(t *testing.T) {
		a := stuckApp()
		finding := stuckFinding(a)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
		r := newTestRemedies(t, fake)
		plan, err := r.TerminateAndResync(context.Background(), finding, true)
		require.NoError(t, err)
		require.Equal(t, "Get app=argocd/shop: operation started at 2026-03-10T11:00:00Z, phase Running (the plan is for this operation only)", plan.Steps[0])
		ended(synccommon.OperationSucceeded, "successfully synced (all tasks run)")(fake.app)
		plan, err = r.TerminateAndResync(context.Background(), finding, true)
		require.Error(t, err)
		require.True(t, syncmedic.IsPermanent(err), "%v", err)
		require.EqualError(t, err, "the operation this plan was for (app=argocd/shop, started at 2026-03-10T11:00:00Z) ended at 2026-03-10T11:59:00Z "+
			"(phase Succeeded: successfully synced (all tasks run)); nothing to fix — re-plan if it is stuck again")
		require.Empty(t, fake.syncs)
		require.Zero(t, fake.terminated)
	})
	t.Run("a finding made on a finished operation (hook-immutable's failed sync) is synced while that operation is unchanged", func(t *testing.T) {
		// hand-written state (through ended): a unit test of the remedy's decision against an in-memory fake; the
		// real controller's Failed hook-immutable sync is driven in argocd/remedy's TestLiveScenarios.
		a := stuckApp()
		ended(synccommon.OperationFailed, "one or more objects failed to apply: field is immutable")(a)
		finding := stuckFinding(a)
		finding.Remedy.Params[rules.ParamOperationPhase] = string(synccommon.OperationFailed)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21"}
		out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), finding, false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Len(t, fake.syncs, 1, "the failed sync the finding was about is synced again")
		require.Zero(t, fake.terminated, "nothing to terminate")
		require.True(t, out.Changed)

		b := stuckApp()
		ended(synccommon.OperationSucceeded, "successfully synced (all tasks run)")(b)
		finding = stuckFinding(b)
		finding.Remedy.Params[rules.ParamOperationPhase] = string(synccommon.OperationFailed)
		fake = &fakeRemedyArgo{app: b, version: "v2.14.21"}
		out, err = newTestRemedies(t, fake).TerminateAndResync(context.Background(), finding, false)
		require.NoError(t, err)
		require.Empty(t, fake.syncs, "planned on Failed, now Succeeded: it ended by itself: %v", out.Steps)
	})
	t.Run("an operation syncmedic terminated is still synced on the next attempt", func(t *testing.T) {
		a := stuckApp()
		finding := stuckFinding(a)
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21", syncErr: status.Error(codes.Unavailable, "connection reset")}
		r := newTestRemedies(t, fake)
		_, err := r.TerminateAndResync(context.Background(), finding, false)
		require.Error(t, err, "the Sync failed after the terminate")
		require.Equal(t, 1, fake.terminated)
		require.Equal(t, synccommon.OperationFailed, fake.app.Status.OperationState.Phase, "Operation terminated")
		fake.syncErr = nil
		out, err := r.TerminateAndResync(context.Background(), finding, false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Len(t, fake.syncs, 1, "the terminated operation is synced again")
		require.Equal(t, 1, fake.terminated, "and not terminated twice")
		require.True(t, out.Changed)
	})
	t.Run("an operation that finished Succeeded before the terminate reached it is not synced", func(t *testing.T) {
		a := stuckApp()
		finding := stuckFinding(a)
		// The terminate is accepted, but the controller had finished the sync already.
		fake := &fakeRemedyArgo{app: a, version: "v2.14.21", afterTerminate: func(f *fakeRemedyArgo) {
			f.app.Status.OperationState.Phase = synccommon.OperationSucceeded
		}}
		out, err := newTestRemedies(t, fake).TerminateAndResync(context.Background(), finding, false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.Empty(t, fake.syncs)
		require.Equal(t, "app=argocd/shop: the operation ended Succeeded before the terminate reached it: nothing to sync again", out.Steps[len(out.Steps)-1])
	})
}

// hookManifest is the live hook Job with uid as GetResource returns it.
func hookManifest(uid string) string {
	return `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"migrate","namespace":"shop","uid":"` + uid +
		`","finalizers":["example.com/keep","argocd.argoproj.io/hook-finalizer"]}}`
}

func finalizerRemedyFinding(a *v1alpha1.Application, uid string, idx int) syncmedic.Finding {
	f := stuckFinding(a)
	f.Remedy.Action = syncmedic.ActionRemoveHookFinalizer
	p := f.Remedy.Params
	p[rules.ParamGroup], p[rules.ParamVersion], p[rules.ParamKind], p[rules.ParamNamespace], p[rules.ParamName] = "batch", "v1", "Job", "shop", "migrate"
	p[rules.ParamPatch], p[rules.ParamPatchType], p[rules.ParamUID], p[rules.ParamThenSync] = rules.RemoveFinalizerPatch(idx, rules.HookFinalizer, uid), rules.JSONPatchType, uid, "false"
	return f
}

func TestRemoveHookFinalizerLeavesARecreatedHookAlone(t *testing.T) {
	const oldUID, newUID = "11111111-aaaa", "22222222-bbbb"
	t.Run("a failed test on a hook re-created under the same name changes nothing, not even on the retry path", func(t *testing.T) {
		a := stuckApp()
		// The finding named index 0; the new hook (v3 adds the finalizer at creation) has it at index 1, so the old
		// code's retry would patch the new object at its index.
		fake := &fakeRemedyArgo{app: a, version: "v3.6.1", live: hookManifest(newUID),
			patchErr: status.Error(codes.InvalidArgument, "the server rejected our request: testing value /metadata/uid failed")}
		out, err := newTestRemedies(t, fake).RemoveHookFinalizer(context.Background(), finalizerRemedyFinding(a, oldUID, 0), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.False(t, out.Changed)
		require.Contains(t, out.Steps[0], "is a new object")
		require.Len(t, fake.patches, 1, "no second patch: %v", fake.patches)
		require.Contains(t, fake.patches[0], `"path":"/metadata/uid","value":"`+oldUID+`"`)
	})
	t.Run("a newer operation than the finding's: nothing is patched", func(t *testing.T) {
		a := stuckApp()
		f := finalizerRemedyFinding(a, oldUID, 1)
		newer := a.DeepCopy()
		newer.Status.OperationState.StartedAt = metav1.NewTime(now)
		fake := &fakeRemedyArgo{app: newer, version: "v3.6.1", live: hookManifest(oldUID)}
		out, err := newTestRemedies(t, fake).RemoveHookFinalizer(context.Background(), f, false)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Contains(t, out.Steps[0], "newer operation")
		require.Empty(t, fake.patches)
	})
	t.Run("a sync requested after the finding's operation finished: nothing is patched", func(t *testing.T) {
		a := stuckApp()
		f := finalizerRemedyFinding(a, oldUID, 1)
		done := a.DeepCopy()
		done.Status.OperationState.Phase = synccommon.OperationSucceeded
		done.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{}}
		fake := &fakeRemedyArgo{app: done, version: "v3.6.1", live: hookManifest(oldUID)}
		out, err := newTestRemedies(t, fake).RemoveHookFinalizer(context.Background(), f, false)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Empty(t, fake.patches)
	})
	t.Run("the same hook is still patched", func(t *testing.T) {
		a := stuckApp()
		fake := &fakeRemedyArgo{app: a, version: "v3.6.1", live: hookManifest(oldUID)}
		out, err := newTestRemedies(t, fake).RemoveHookFinalizer(context.Background(), finalizerRemedyFinding(a, oldUID, 1), false)
		require.NoError(t, err, "steps: %v", out.Steps)
		require.True(t, out.Changed)
		require.Len(t, fake.patches, 1)
	})
}
