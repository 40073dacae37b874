package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv/argofixture"
)

// The shared fixtures (internal/testenv/argofixture).
var (
	now        = argofixture.Now
	ago        = argofixture.Ago
	app        = argofixture.App
	runningOp  = argofixture.RunningOp
	reconciled = argofixture.Reconciled
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(y), &u.Object))
	return u
}

// hookJob is the seed incident's hook Job: a PreSync migrate Job of app "shop".
func hookJob(t *testing.T, finalizers []string, deleted *metav1.Time, complete bool) *unstructured.Unstructured {
	u := obj(t, `
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: shop
  annotations:
    argocd.argoproj.io/hook: PreSync
    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation
`)
	u.SetCreationTimestamp(*ago(3 * time.Hour))
	u.SetFinalizers(finalizers)
	if deleted != nil {
		u.SetDeletionTimestamp(deleted)
	}
	if complete {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []interface{}{
			map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": now.Add(-59 * time.Minute).Format(time.RFC3339)},
		}, "status", "conditions"))
	}
	return u
}

// hand-written state: failedOp builds a failed operation state in memory for the pure rule tests (nothing is written
// to an apiserver); the real controllers produce one in internal/conformance/argo (the failed "field is immutable"
// sync of TestImmutableHookTemplateChange, on v2.14.21 and v3.6.1).
func failedOp(msg string) *v1alpha1.OperationState {
	return &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: "9a8b7c6"}},
		Phase:     synccommon.OperationFailed, Message: msg, StartedAt: *ago(20 * time.Minute), FinishedAt: ago(19 * time.Minute),
	}
}

func rules(fs []syncmedic.Finding) []syncmedic.RuleID {
	var out []syncmedic.RuleID
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

func TestEvaluate(t *testing.T) {
	th := DefaultThresholds()
	const waiting = "waiting for completion of hook batch/Job/migrate"
	immutable := `one or more objects failed to apply, reason: Job.batch "migrate" is invalid: spec.template: Invalid value: core.PodTemplateSpec{}: field is immutable`
	// keptImmutableHook is the observation of a sync that failed with immutable on the old PreSync hook Job migrate,
	// which its delete policy (HookSucceeded) keeps, with finalizers and, when deleted is not nil, its deletion
	// timestamp.
	// slowBesideLostFast is v2.14.21's wave of a slow hook beside a fast one its TTL deleted before the controller saw
	// it finish (the operation, built by runningOp, waits on both; the real controller drives this state in
	// internal/conformance/argo's TestSlowAndFastHookWaveLosesTheFastHookOnV2): the slow Job still runs, or, when
	// slowDone is not zero, completed slowDone ago.
	slowBesideLostFast := func(t *testing.T, slowDone time.Duration) AppObservation {
		op := runningOp(time.Hour, waiting, "")
		op.SyncResult = &v1alpha1.SyncOperationResult{Revision: "4f2c1e9", Resources: v1alpha1.ResourceResults{
			{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning},
			{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "slow-migrate", HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning},
		}}
		slow := hookJob(t, nil, nil, false)
		slow.SetName("slow-migrate")
		if slowDone != 0 {
			require.NoError(t, unstructured.SetNestedSlice(slow.Object, []interface{}{
				map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": now.Add(-slowDone).Format(time.RFC3339)},
			}, "status", "conditions"))
		}
		return AppObservation{App: app(op), HooksKnown: true, StateSince: now.Add(-10 * time.Minute), ServerVersion: "v2.14.21",
			Hooks: []*unstructured.Unstructured{slow}}
	}
	keptImmutableHook := func(t *testing.T, finalizers []string, deleted *metav1.Time) AppObservation {
		j := hookJob(t, finalizers, deleted, false)
		j.SetAnnotations(map[string]string{"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/hook-delete-policy": "HookSucceeded"})
		return AppObservation{App: app(failedOp(immutable)), HooksKnown: true, Hooks: []*unstructured.Unstructured{j}}
	}
	tests := []evalCase{
		{
			name: "a deleted hook Job held by the hook finalizer past the threshold is stuck",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Hour, "waiting for deletion of batch/Job/migrate", "")), HooksKnown: true,
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{"foregroundDeletion", HookFinalizer}, ago(10*time.Minute), true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
				require.Equal(t, `[{"op":"test","path":"/metadata/finalizers/1","value":"argocd.argoproj.io/hook-finalizer"},{"op":"remove","path":"/metadata/finalizers/1"}]`, f.Remedy.Params[ParamPatch])
				require.Equal(t, "false", f.Remedy.Params[ParamThenSync], "gitops-engine creates the new hook once the old one is gone: removing the finalizer alone unblocks the operation")
				require.False(t, f.Remedy.RerunsHooks, "the minimal remedy re-runs no hook")
				require.Len(t, f.Remedy.Commands, 2, "no terminate-op or sync command: nothing but the finalizer is touched")
				require.Equal(t, "4f2c1e9", f.Remedy.Params[ParamRevision])
				require.Equal(t, "Job", f.Object.Kind)
				require.Equal(t, "shop", f.Object.App)
				require.Contains(t, f.Remedy.Commands[0], "argocd app patch-resource argocd/shop --kind Job --resource-name migrate --namespace shop --group batch")
			},
		},
		{
			name: "a deleted hook Job inside the threshold is not reported yet",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Minute, "waiting for deletion of batch/Job/migrate", "")), HooksKnown: true,
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(30*time.Second), true)}}
			},
		},
		{
			name: "a hook finalizer on a Job whose operation is still running normally is not reported",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Minute, waiting, synccommon.OperationRunning)), HooksKnown: true,
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, nil, false)}}
			},
		},
		{
			name: "a hook finalizer left after the operation finished (v2.14.3 downgraded) is reported without a resync",
			obs: func(t *testing.T) AppObservation {
				op := failedOp("successfully synced")
				op.Phase = synccommon.OperationSucceeded
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v2.14.11+8f2f4f5",
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, nil, true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "false", fs[0].Remedy.Params[ParamThenSync])
				require.Len(t, fs[0].Advisories, 1)
				require.Contains(t, fs[0].Advisories[0], "left by v2.14.3")
			},
		},
		{
			name: "a finalizer on an object that is not a hook is none of this rule's business",
			obs: func(t *testing.T) AppObservation {
				j := hookJob(t, []string{HookFinalizer}, ago(time.Hour), true)
				j.SetAnnotations(nil)
				return AppObservation{App: app(nil), HooksKnown: true, Hooks: []*unstructured.Unstructured{j}}
			},
		},
		{
			name: "an operation waiting past the threshold on a hook Job that completed is a missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(runningOp(time.Hour, waiting, synccommon.OperationRunning)), time.Minute), HooksKnown: true, ServerVersion: "v2.14.21",
					Hooks: []*unstructured.Unstructured{hookJob(t, nil, nil, true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, syncmedic.ActionTerminateAndResync, f.Remedy.Action)
				require.True(t, f.Remedy.RerunsHooks, "a new sync re-runs every hook")
				require.Contains(t, f.Remedy.Description, "runs every hook of the application again")
				require.Equal(t, "Sync of argocd/shop has waited 59m for hook batch/Job/migrate since it finished", f.Summary, "counted from when the Job finished, not from the operation's start an hour ago")
				require.Equal(t, now.Add(-59*time.Minute), f.Since, "counted from when the Job finished")
				require.Equal(t, []string{"argocd app terminate-op argocd/shop", "argocd app sync argocd/shop --revision 4f2c1e9 --sync-option CreateNamespace=true"}, f.Remedy.Commands)
				require.Equal(t, "CreateNamespace=true", f.Remedy.Params[ParamSyncOptions])
				require.Contains(t, f.Advisories[0], "#21055")
			},
		},
		{
			name: "an operation waiting on a hook Job that was deleted by its TTL is a missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(runningOp(time.Hour, waiting, "")), time.Minute), HooksKnown: true}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Evidence[len(fs[0].Evidence)-1].Value, "not found")
				require.Contains(t, fs[0].Summary, "which is not found", "the evidence is that it is missing, not that it finished")
			},
		},
		{
			name: "a hook Job that finished a minute ago is not a missed completion yet, however old the operation",
			obs: func(t *testing.T) AppObservation {
				j := hookJob(t, nil, nil, false)
				require.NoError(t, unstructured.SetNestedSlice(j.Object, []interface{}{
					map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": now.Add(-time.Minute).Format(time.RFC3339)},
				}, "status", "conditions"))
				return AppObservation{App: app(runningOp(time.Hour, waiting, synccommon.OperationRunning)), HooksKnown: true,
					StateSince: now.Add(-time.Minute), Hooks: []*unstructured.Unstructured{j}}
			},
		},
		{
			name: "a TTL-deleted hook is not a missed completion while another hook of the wave still runs (terminating would kill it)",
			obs:  func(t *testing.T) AppObservation { return slowBesideLostFast(t, 0) },
		},
		{
			name: "a TTL-deleted hook is not a missed completion yet when another hook of the wave finished only just now (the controller records it on its next pass)",
			obs:  func(t *testing.T) AppObservation { return slowBesideLostFast(t, 2*time.Second) },
		},
		{
			name: "a hook missing from the resource tree right after the operation moved on is not a missed completion yet",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Hour, waiting, "")), HooksKnown: true, StateSince: now.Add(-10 * time.Second)}
			},
		},
		{
			name: "a fast hook deleted by its TTL beside a slow hook of the same wave keeps the finalizer by design (v3)",
			obs: func(t *testing.T) AppObservation {
				op := runningOp(10*time.Minute, "waiting for completion of hook batch/Job/slow-migrate", "")
				op.SyncResult = &v1alpha1.SyncOperationResult{Revision: "4f2c1e9", Resources: v1alpha1.ResourceResults{
					{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationSucceeded},
					{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "slow-migrate", HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning},
				}}
				slow := hookJob(t, []string{HookFinalizer}, nil, false)
				slow.SetName("slow-migrate")
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v3.6.1",
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(8*time.Minute), true), slow}}
			},
		},
		{
			name: "a deleted hook the v3 operation waits to delete past the threshold is stuck, and only its finalizer is removed",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Hour, "waiting for deletion of hook batch/Job/migrate", "")), HooksKnown: true,
					ServerVersion: "v3.0.12", Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(10*time.Minute), true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "false", fs[0].Remedy.Params[ParamThenSync])
				require.Contains(t, fs[0].Evidence[len(fs[0].Evidence)-1].Value, "deletion of this hook")
			},
		},
		{
			name: "a deleted hook held by the finalizer while the operation just changed state is given the whole threshold",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(time.Hour, "", "")), HooksKnown: true, StateSince: now.Add(-30 * time.Second),
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(10*time.Minute), true)}}
			},
		},
		{
			name: "a deleted hook the operation still records Running after the controller's last change gets the finalizer removed first, not a terminate",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(runningOp(time.Hour, waiting, synccommon.OperationRunning)), time.Minute), HooksKnown: true,
					StateSince: now.Add(-6 * time.Minute), // the controller changed the operation after the deletion
					Hooks:      []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(10*time.Minute), true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, fs[0].Remedy.Action)
				require.Equal(t, "also (argocd/hook-completion-missed)", fs[0].Evidence[len(fs[0].Evidence)-1].Field)
			},
		},
		{
			name: "an operation waiting on a hook Job that is still running is not a missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(10*time.Minute, waiting, synccommon.OperationRunning)), HooksKnown: true,
					Hooks: []*unstructured.Unstructured{hookJob(t, nil, nil, false)}}
			},
		},
		{
			name: "without knowing the hooks' live state nothing is claimed about them",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(10*time.Minute, waiting, synccommon.OperationRunning))}
			},
		},
		{
			name: "a failed sync with field is immutable and the old hook held by the finalizer is an immutable hook",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(failedOp(immutable)), HooksKnown: true, ServerVersion: "v2.14.3+71fd4e5",
					Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, nil, true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookImmutable},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
				require.Equal(t, "true", f.Remedy.Params[ParamThenSync])
				require.True(t, f.Remedy.RerunsHooks, "the sync after the patch runs the hooks again")
				require.Equal(t, "also (argocd/hook-finalizer-stuck)", f.Evidence[len(f.Evidence)-1].Field,
					"one object, one plan: the finalizer finding is folded into the immutable-hook one")
				require.Equal(t, "9a8b7c6", f.Remedy.Params[ParamRevision])
				require.Contains(t, f.Advisories[0], "v2.14.4")
			},
		},
		{
			name: "a failed sync with field is immutable and no old hook left is not an immutable hook",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(failedOp(immutable)), HooksKnown: true, Hooks: []*unstructured.Unstructured{hookJob(t, nil, nil, true)}}
			},
		},
		{
			name: "a failed hook kept by HookSucceeded blocks every later sync with field is immutable: delete it through Argo CD",
			obs: func(t *testing.T) AppObservation {
				return keptImmutableHook(t, nil, nil)
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookImmutable},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Summary, "kept by its delete policy")
				require.Equal(t, syncmedic.ActionNone, fs[0].Remedy.Action)
				require.Equal(t, "argocd app delete-resource argocd/shop --kind Job --resource-name migrate --namespace shop --group batch", fs[0].Remedy.Commands[0])
			},
		},
		{
			name: "a failed hook kept by HookSucceeded that also keeps the hook finalizer gets one plan: remove the finalizer, no sync that would fail again",
			obs: func(t *testing.T) AppObservation {
				return keptImmutableHook(t, []string{HookFinalizer}, nil)
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookImmutable},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Contains(t, f.Summary, "kept by its delete policy")
				require.Contains(t, f.Summary, "hook finalizer")
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
				require.Equal(t, "false", f.Remedy.Params[ParamThenSync], "the old hook stays after the patch: a sync would fail the same way")
				require.False(t, f.Remedy.RerunsHooks)
				require.Contains(t, f.Remedy.Commands, "argocd app delete-resource argocd/shop --kind Job --resource-name migrate --namespace shop --group batch",
					"deleting the kept hook stays a person's step")
				require.Equal(t, "also (argocd/hook-finalizer-stuck)", f.Evidence[len(f.Evidence)-1].Field)
			},
		},
		{
			name: "an old hook a person just deleted (foreground deletion in progress) is going away: nothing to report, no sync that would race theirs",
			obs: func(t *testing.T) AppObservation {
				return keptImmutableHook(t, []string{"foregroundDeletion"}, ago(20*time.Second))
			},
		},
		{
			name: "an old hook deleting past the threshold is stuck deleting: a person looks at what holds it, no sync that would fail the same way",
			obs: func(t *testing.T) AppObservation {
				return keptImmutableHook(t, []string{"example.com/cleanup"}, ago(10*time.Minute))
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookImmutable},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Contains(t, f.Summary, "stuck deleting")
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action)
				require.False(t, f.Remedy.RerunsHooks)
				require.Contains(t, f.Remedy.Description, "example.com/cleanup")
				require.Equal(t, "kubectl -n shop get job migrate -o jsonpath='{.metadata.finalizers}'", f.Remedy.Commands[0])
			},
		},
		{
			name: "field is immutable on a ConfigMap is not blamed on a hook Job held by the finalizer",
			obs: func(t *testing.T) AppObservation {
				op := failedOp(`one or more objects failed to apply, reason: ConfigMap "settings" is invalid: data: Forbidden: field is immutable when immutable is set`)
				return AppObservation{App: app(op), HooksKnown: true, Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, nil, true)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
		},
		{
			name: "an operation running with no change past the threshold is stuck",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(2*time.Hour, "waiting for healthy state of apps/Deployment/web", "")), HooksKnown: true, StateSince: now.Add(-45 * time.Minute), UIURL: "https://cd.example.com/"}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.False(t, fs[0].Remedy.AutoSafe, "terminating an arbitrary operation is never automatic-safe by default")
				require.Equal(t, "https://cd.example.com/applications/argocd/shop", fs[0].Links[0].URL)
				require.Equal(t, "Application", fs[0].Object.Kind)
			},
		},
		{
			name: "an operation whose state changed recently is not stuck",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(runningOp(2*time.Hour, "waiting for healthy state of apps/Deployment/web", "")), StateSince: now.Add(-time.Minute)}
			},
		},
		{
			name: "an application with no operation has nothing stuck",
			obs:  func(t *testing.T) AppObservation { return AppObservation{App: app(nil), HooksKnown: true} },
		},
	}
	runEvalCases(t, th, tests)
}

// evalCase is one row of a table test of Evaluate: the observation, the rules expected (nil: nothing reported) and
// further checks of the findings.
type evalCase struct {
	name  string
	obs   func(t *testing.T) AppObservation
	want  []syncmedic.RuleID
	check func(t *testing.T, fs []syncmedic.Finding)
}

// runEvalCases runs Evaluate on each case, checks what every finding must carry, and that the watcher's trimmed copy
// of the application gives the same findings.
func runEvalCases(t *testing.T, th Thresholds, tests []evalCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := Evaluate(tt.obs(t), now, th)
			require.Equal(t, tt.want, rules(fs))
			for _, f := range fs {
				require.NotEmpty(t, f.Summary)
				require.NotEmpty(t, f.Evidence)
				require.NotEmpty(t, f.Remedy.Commands)
				require.Equal(t, syncmedic.Fingerprint(f.Rule, f.Object), f.Fingerprint)
			}
			if tt.check != nil {
				tt.check(t, fs)
			}
			t.Run("the watcher's trimmed copy of the application gives the same findings", func(t *testing.T) {
				obs := tt.obs(t)
				obs.App = decorated(obs.App)
				full := Evaluate(obs, now, th)
				obs.App = Retained(obs.App)
				require.Equal(t, full, Evaluate(obs, now, th))
			})
		})
	}
}

// finishedHook is the PreSync hook Job name of app shop, complete since finished ago, with finalizers and, when
// deleted is not nil, a deletion timestamp: a ttlSecondsAfterFinished: 0 hook is deleted as it completes.
func finishedHook(t *testing.T, name string, finalizers []string, finished time.Duration, deleted *metav1.Time) *unstructured.Unstructured {
	j := hookJob(t, finalizers, deleted, false)
	j.SetName(name)
	require.NoError(t, unstructured.SetNestedSlice(j.Object, []interface{}{
		map[string]interface{}{"type": "Complete", "status": "True", "lastTransitionTime": now.Add(-finished).Format(time.RFC3339)},
	}, "status", "conditions"))
	return j
}

// hand-written state: waveOp and retryingOp build operation states in memory for the pure rule tests, as the real
// controllers write them (upstream lines quoted where each is used); internal/conformance/argo drives the real
// controllers into them.

// waveOp is a running operation of one PreSync wave whose hooks names the controller last recorded Running, with
// message msg.
func waveOp(msg string, names ...string) *v1alpha1.OperationState {
	op := runningOp(time.Hour, msg, "")
	op.SyncResult = &v1alpha1.SyncOperationResult{Revision: "4f2c1e9"}
	for _, n := range names {
		op.SyncResult.Resources = append(op.SyncResult.Resources, &v1alpha1.ResourceResult{Group: "batch", Version: "v1", Kind: "Job",
			Namespace: "shop", Name: n, HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning})
	}
	return op
}

// retryingOp is an operation between two attempts: Running, started ten minutes before its attempt failed and set
// finishedAt finished ago, retryCount count, the
// retry strategy's backoff, the failed attempt's sync result (hook migrate still Running) and message msg.
func retryingOp(finished time.Duration, count int64, backoff *v1alpha1.Backoff, msg string) *v1alpha1.OperationState {
	op := waveOp(msg, "migrate")
	op.StartedAt, op.FinishedAt = *ago(finished + 10*time.Minute), ago(finished)
	op.RetryCount = count
	op.Operation.Retry = v1alpha1.RetryStrategy{Limit: 5, Backoff: backoff}
	return op
}

// The hook rules act only while the application-controller processes the operation (issue 26 items 1, 2 and 6):
// not while a sync window blocks it, not while it waits for its retry backoff, not while it is terminating, and not
// on a hook the controller has not looked at since it was deleted or finished.
func TestRulesWaitForTheController(t *testing.T) {
	th := DefaultThresholds()
	// v3.6.1 controller/sync.go:194-203 (v3.0.12 :171-181, v2.14.21 :176-186): a Running operation a window blocks
	// gets this message and SyncAppState returns before gitops-engine runs, so no hook result moves.
	const blocked = "Sync operation blocked by sync window"
	fastAndSlow := func(t *testing.T, fastDeleted time.Duration) []*unstructured.Unstructured {
		slow := hookJob(t, []string{HookFinalizer}, nil, false)
		slow.SetName("slow")
		return []*unstructured.Unstructured{finishedHook(t, "fast", []string{HookFinalizer}, fastDeleted, ago(fastDeleted)), slow}
	}
	tests := []evalCase{
		{
			name: "v3: a TTL-deleted fast hook held by the finalizer while a sync window blocks the wave is not touched",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp(blocked, "fast", "slow")), HooksKnown: true, ServerVersion: "v3.6.1",
					StateSince: now.Add(-20 * time.Minute), Hooks: fastAndSlow(t, 10*time.Minute)}
			},
		},
		{
			name: "v3.0: the same with the window's own error appended to the message",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp(blocked+": invalid sync windows: bad schedule", "fast", "slow")), HooksKnown: true,
					ServerVersion: "v3.0.12", StateSince: now.Add(-20 * time.Minute), Hooks: fastAndSlow(t, 10*time.Minute)}
			},
		},
		{
			name: "an operation a sync window has blocked past the operation-stuck threshold is reported as blocked, with nothing to apply",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp(blocked, "fast", "slow")), HooksKnown: true, ServerVersion: "v3.6.1",
					StateSince: now.Add(-45 * time.Minute), Hooks: fastAndSlow(t, 40*time.Minute)}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, "Application", f.Object.Kind)
				require.Contains(t, f.Summary, "blocked by a sync window of project default")
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "neither terminate nor sync while the window blocks them")
				require.False(t, f.Remedy.AutoSafe)
				require.Equal(t, "argocd proj windows list default", f.Remedy.Commands[0])
				require.Equal(t, now.Add(-45*time.Minute), f.Since)
			},
		},
		{
			name: "v2.14.21: a hook that finished while a sync window blocks the operation still shows Running: no missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp(blocked, "migrate")), HooksKnown: true, ServerVersion: "v2.14.21",
					StateSince: now.Add(-10 * time.Minute), Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 8*time.Minute, nil)}}
			},
		},
		{
			name: "v2.14.21: nor is a hook deleted by its TTL while the window blocks the operation",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp(blocked, "migrate")), HooksKnown: true, ServerVersion: "v2.14.21",
					StateSince: now.Add(-10 * time.Minute)}
			},
		},
		{
			name: "a TTL-deleted hook the operation waits to complete, with no change of the operation since the deletion, is a slow controller's: not touched",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp("waiting for completion of hook batch/Job/migrate", "migrate")), HooksKnown: true,
					ServerVersion: "v3.6.1", StateSince: now.Add(-20 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, ago(10*time.Minute))}}
			},
		},
		{
			name: "a change of the operation within the second of the deletion is no sign the controller saw the deletion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp("waiting for completion of hook batch/Job/migrate", "migrate")), HooksKnown: true,
					ServerVersion: "v3.6.1", StateSince: now.Add(-10*time.Minute + 500*time.Millisecond),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, ago(10*time.Minute))}}
			},
		},
		{
			name: "after a restart of syncmedic (no change seen yet) a TTL-deleted hook the operation waits to complete is not touched",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp("waiting for completion of hook batch/Job/migrate", "migrate")), HooksKnown: true,
					ServerVersion: "v3.6.1", Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, ago(10*time.Minute))}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "Application", fs[0].Object.Kind, "only the notify-only operation-stuck, on the application (started an hour ago)")
				require.False(t, fs[0].Remedy.AutoSafe)
			},
		},
		{
			name: "v3: a finished hook the finalizer still holds, with no change of the operation since it finished, is no missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: app(waveOp("waiting for completion of hook batch/Job/migrate", "migrate")), HooksKnown: true,
					ServerVersion: "v3.6.1", StateSince: now.Add(-20 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, nil)}}
			},
		},
		{
			name: "v3: the same hook after the controller changed the operation and still records it Running is a missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp("waiting for completion of hook batch/Job/migrate", "migrate")), time.Minute), HooksKnown: true,
					ServerVersion: "v3.6.1", StateSince: now.Add(-6 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, nil)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, now.Add(-6*time.Minute), fs[0].Since, "counted from the controller's last change")
			},
		},
		{
			name: "a deleted hook under an operation being terminated is left to the controller's terminate",
			obs: func(t *testing.T) AppObservation {
				op := waveOp("operation is terminating", "migrate")
				op.Phase = synccommon.OperationTerminating
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v3.0.12", StateSince: now.Add(-5 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 10*time.Minute, ago(10*time.Minute))}}
			},
		},
		{
			name: "v3.0.12: the operation that waits for the deletion of this very hook is stuck, whatever syncmedic saw change",
			obs: func(t *testing.T) AppObservation {
				// gitops-engine (v3.0.12's 89c110b5) writes "waiting for deletion of hook G/K/N" on the pass that deleted the
				// old hook (sync_context.go setRunningPhase with isPendingDeletion): the controller's own record.
				return AppObservation{App: app(runningOp(time.Hour, "waiting for deletion of hook batch/Job/migrate", "")), HooksKnown: true,
					ServerVersion: "v3.0.12", Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 2*time.Hour, ago(10*time.Minute))}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
		},
		{
			name: "v2.14.21: an old hook this sync deleted, held only by a leftover hook finalizer, is still reported with no change seen",
			obs: func(t *testing.T) AppObservation {
				// gitops-engine c08b0a72 (v2.14.21) sync_context.go:530 and 558-561 leave "one or more tasks are running" while it
				// waits for a BeforeHookCreation hook to go: no result names the old hook, so no completion can be missed.
				return AppObservation{App: app(runningOp(time.Hour, "one or more tasks are running", "")), HooksKnown: true,
					ServerVersion: "v2.14.21", Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 2*time.Hour, ago(10*time.Minute))}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
		},
		{
			name: "v2.14.21: an operation waiting to retry keeps the failed attempt's Running hook: no missed completion",
			obs: func(t *testing.T) AppObservation {
				// v2.14.21 controller/appcontroller.go:1469-1480: Running, finishedAt now, retryCount+1, the old sync result.
				op := retryingOp(10*time.Minute, 2, &v1alpha1.Backoff{Duration: "10m", MaxDuration: "1h"},
					"one or more synchronization tasks completed unsuccessfully due to application controller sync timeout. Retrying attempt #2 at 12:10PM.")
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v2.14.21", StateSince: now.Add(-10 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 59*time.Minute, nil)}}
			},
		},
		{
			name: "v3.6.1: an operation waiting to retry is not a reason to release its deleted hook",
			obs: func(t *testing.T) AppObservation {
				// v3.6.1 controller/appcontroller.go:1746-1759.
				op := retryingOp(5*time.Minute, 1, &v1alpha1.Backoff{Duration: "5m"},
					"one or more synchronization tasks completed unsuccessfully. Retrying attempt #1 at 2026-03-10T12:00:00Z.")
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v3.6.1", StateSince: now.Add(-5 * time.Minute),
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 8*time.Minute, ago(8*time.Minute))}}
			},
		},
		{
			name: "a retry backoff longer than the operation-stuck threshold is on schedule until the retry is due",
			obs: func(t *testing.T) AppObservation {
				// retryCount 1 after the first failure: the controller waits duration*factor^1 = 2h (appcontroller.go:1679).
				op := retryingOp(time.Hour, 1, &v1alpha1.Backoff{Duration: "1h", MaxDuration: "3h"}, "one or more objects failed to apply. Retrying attempt #1 at 2026-03-10T12:00:00Z.")
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v3.6.1", StateSince: now.Add(-time.Hour)}
			},
		},
		{
			name: "a retry due past the operation-stuck threshold that never started is reported, counted from when it was due",
			obs: func(t *testing.T) AppObservation {
				op := retryingOp(2*time.Hour, 1, nil, "one or more objects failed to apply. Retrying attempt #1 at 2026-03-10T10:00:05Z.")
				return AppObservation{App: app(op), HooksKnown: true, ServerVersion: "v3.6.1"}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				due := now.Add(-2*time.Hour + 10*time.Second) // the default backoff: 5s * 2^1
				require.Equal(t, due, f.Since)
				require.Contains(t, f.Summary, "was due to retry (attempt #1)")
				require.Equal(t, "next retry due", f.Evidence[len(f.Evidence)-1].Field)
				require.False(t, f.Remedy.AutoSafe)
			},
		},
	}
	runEvalCases(t, th, tests)
}

// decorated fills the fields of a an Argo CD server returns and the watcher does not keep.
func decorated(a *v1alpha1.Application) *v1alpha1.Application {
	a = a.DeepCopy()
	a.UID, a.ResourceVersion, a.Generation = "6b1f3c9e-uid", "4242", 7
	a.Labels = map[string]string{"team": "shop"}
	a.Annotations = map[string]string{"argocd.argoproj.io/refresh": "normal", "notified.notifications.argoproj.io": "{}",
		syncmedic.SlackChannelAnnotation: "#shop"}
	a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "argocd-application-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	a.Spec.Source = &v1alpha1.ApplicationSource{RepoURL: "https://git.example.com/shop.git", Path: "deploy", TargetRevision: "main"}
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{Prune: true}}
	a.Status.Sync = v1alpha1.SyncStatus{Status: v1alpha1.SyncStatusCodeOutOfSync, Revision: "4f2c1e9"}
	a.Status.Health = v1alpha1.HealthStatus{Status: "Progressing", Message: "waiting for rollout"}
	a.Status.History = v1alpha1.RevisionHistories{{ID: 3, Revision: "1a2b3c4", DeployedAt: *ago(48 * time.Hour)}}
	a.Status.Summary = v1alpha1.ApplicationSummary{Images: []string{"shop:1.2.3"}}
	a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionSyncError, Message: "one or more objects failed"}}
	a.Status.Resources = []v1alpha1.ResourceStatus{{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", Hook: true}}
	a.Status.ReconciledAt = ago(time.Minute)
	return a
}

func TestAdvisories(t *testing.T) {
	tests := []struct {
		name, version string
		rule          syncmedic.RuleID
		want          string
	}{
		{"v2.14.3 is named as the release that adds the finalizer", "v2.14.3+71fd4e5", syncmedic.RuleHookFinalizerStuck, "v2.14.4"},
		{"v2.13 explains the finalizer was left by v2.14.3", "v2.13.5", syncmedic.RuleHookFinalizerStuck, "left by v2.14.3"},
		{"v3.0.10 is told to upgrade to v3.0.16", "v3.0.10", syncmedic.RuleHookFinalizerStuck, "fixed in v3.0.16"},
		{"v3.1.4 has its line's fix but not the full one", "v3.1.4", syncmedic.RuleHookFinalizerStuck, "full hook-finalizer fix of v3.4.0"},
		{"v3.4.1 has the full fix and names the open reports", "v3.4.1", syncmedic.RuleHookImmutable, "#29464"},
		{"v2.14.21 explains the fast-Job race has no 2.x fix", "v2.14.21", syncmedic.RuleHookCompletionMissed, "#6880"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Advisories(tt.version, tt.rule)
			require.Len(t, a, 1)
			require.Contains(t, a[0], tt.want)
		})
	}
	t.Run("an unknown version gives no advisory", func(t *testing.T) {
		require.Empty(t, Advisories("devel", syncmedic.RuleHookFinalizerStuck))
		require.Empty(t, Advisories("", syncmedic.RuleHookFinalizerStuck))
	})
	t.Run("rules unrelated to hooks get no advisory", func(t *testing.T) {
		require.Empty(t, Advisories("v2.14.3", syncmedic.RuleOperationStuck))
	})
}

func BenchmarkEvaluate(b *testing.B) {
	t := &testing.T{}
	obs := AppObservation{App: app(runningOp(time.Hour, "waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning)), HooksKnown: true,
		Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, ago(10*time.Minute), true)}, ServerVersion: "v3.0.10",
		StateSince: now.Add(-6 * time.Minute)} // the controller changed the operation after the deletion: the hook rules' path
	th := DefaultThresholds()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if len(Evaluate(obs, now, th)) == 0 {
			b.Fatal("no finding")
		}
	}
}
