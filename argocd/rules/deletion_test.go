package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

func deletingApp(age time.Duration, finalizers ...string) *v1alpha1.Application {
	a := app(nil)
	a.DeletionTimestamp = ago(age)
	a.Finalizers = finalizers
	a.Status.Resources = []v1alpha1.ResourceStatus{
		{Version: "v1", Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data-0"},
		{Group: "apps", Version: "v1", Kind: "StatefulSet", Namespace: "shop", Name: "db"},
	}
	return a
}

func TestAppDeletionStuck(t *testing.T) {
	th := DefaultThresholds()
	// What argo-cd v3.6.1 writes while PreDelete hooks hold a deletion: the controller adds both pre-delete finalizers
	// to an app with a PreDelete hook (controller/appcontroller.go:2133-2147); a failed hook is deleted and the error
	// "PreDelete hook(s) failed: ns/name" (controller/hook.go:254, wrapped at appcontroller.go:1406) becomes the
	// DeletionError condition (appcontroller.go:1128-1131), which the controller never removes.
	preDeleting := func(age time.Duration, conditionMessage string) *v1alpha1.Application {
		a := deletingApp(age, ResourcesFinalizer, PreDeleteFinalizer, PreDeleteFinalizer+"/cleanup")
		if conditionMessage != "" {
			a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionDeletionError, Message: conditionMessage}}
		}
		return a
	}
	failedPreDeleteHook := func(t *testing.T) []*unstructured.Unstructured {
		j := hookJob(t, nil, nil, false)
		j.SetName("pre-cleanup")
		j.SetAnnotations(map[string]string{"argocd.argoproj.io/hook": "PreDelete"})
		require.NoError(t, unstructured.SetNestedSlice(j.Object, []interface{}{
			map[string]interface{}{"type": "Failed", "status": "True", "lastTransitionTime": now.Add(-time.Minute).Format(time.RFC3339)},
		}, "status", "conditions"))
		return []*unstructured.Unstructured{j}
	}
	tests := []struct {
		name       string
		app        *v1alpha1.Application
		hooks      func(t *testing.T) []*unstructured.Unstructured
		want       bool
		because    string
		notBecause string // a wrong explanation the finding must not give
		command    string // in the last proposed command
		evidence   syncmedic.Evidence
	}{
		{name: "an app held by the resources finalizer past the threshold names the resources Argo CD waits for",
			app: deletingApp(time.Hour, ResourcesFinalizer), want: true, because: "waits for 2 resource(s)"},
		{name: "the foreground variant of the finalizer counts too",
			app: deletingApp(time.Hour, v1alpha1.ForegroundPropagationPolicyFinalizer), want: true, because: "waits for 2 resource(s)"},
		{name: "a deletion error Argo CD recorded (an unreachable cluster) is the first reason given",
			app: func() *v1alpha1.Application {
				a := deletingApp(time.Hour, ResourcesFinalizer)
				a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionDeletionError,
					Message: `failed to get cluster info for "https://10.0.0.1": dial tcp 10.0.0.1:443: i/o timeout`}}
				return a
			}(), want: true, because: "deletion error: failed to get cluster info"},
		{name: "PostDelete hooks that have not finished hold the post-delete finalizer",
			app: func() *v1alpha1.Application {
				a := deletingApp(time.Hour, PostDeleteFinalizer)
				a.Status.Resources = nil
				return a
			}(), want: true, because: "PostDelete hooks"},
		{name: "v3.6.1: PreDelete hooks that have not succeeded hold the whole deletion: nothing is deleted yet, so no resource is blamed",
			app: preDeleting(time.Hour, ""), want: true, because: "its PreDelete hooks have not all succeeded: Argo CD deletes nothing",
			notBecause: "waits for 2 resource(s)",
			command:    `{"op":"test","path":"/metadata/finalizers/1","value":"pre-delete-finalizer.argocd.argoproj.io"},{"op":"remove","path":"/metadata/finalizers/1"}`},
		{name: "v3.6.1: the failed PreDelete hook the DeletionError condition names is the reason, and it is run again and again",
			app:  preDeleting(time.Hour, "error executing pre-delete hooks: PreDelete hook(s) failed: shop/pre-cleanup"),
			want: true, because: "its PreDelete hook(s) shop/pre-cleanup failed: Argo CD deletes a failed PreDelete hook and runs it again",
			notBecause: "waits for 2 resource(s)", command: "skips the PreDelete hooks"},
		{name: "v3.6.1: a PreDelete hook is the reason even when the controller reported another deletion error meanwhile",
			app: preDeleting(time.Hour, `configmaps "settings" not found`), hooks: failedPreDeleteHook, want: true,
			because: `has been deleting for 1h: a PreDelete hook failed: Argo CD deletes a failed PreDelete hook`, notBecause: "settings"},
		{name: "v3.6.1: a failed PreDelete hook seen live is the reason before the controller has recorded its failure",
			app: preDeleting(time.Hour, ""), hooks: failedPreDeleteHook, want: true,
			because: "a PreDelete hook failed: Argo CD deletes a failed PreDelete hook", notBecause: "waits for 2 resource(s)"},
		{name: "v3.6.1: a PreDelete error left from a stage Argo CD has passed is not the reason: the resources it waits for are",
			app: func() *v1alpha1.Application {
				a := deletingApp(time.Hour, ResourcesFinalizer, PreDeleteFinalizer+"/cleanup")
				a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionDeletionError,
					Message: "error executing pre-delete hooks: PreDelete hook(s) failed: shop/pre-cleanup"}}
				return a
			}(), want: true, because: "has been deleting for 1h: Argo CD waits for 2 resource(s) to be deleted", notBecause: "PreDelete hook",
			evidence: syncmedic.Evidence{Field: "condition DeletionError (left from the PreDelete stage, which Argo CD has passed: pre-delete-finalizer is gone)",
				Value: "error executing pre-delete hooks: PreDelete hook(s) failed: shop/pre-cleanup"}},
		{name: "v3.6.1: an app held only by the pre-delete finalizer is reported",
			app: func() *v1alpha1.Application {
				a := deletingApp(time.Hour, PreDeleteFinalizer)
				a.Status.Resources = nil
				return a
			}(), want: true, because: "its PreDelete hooks have not all succeeded", command: `"path":"/metadata/finalizers/0"`},
		{name: "v3.6.1: an app held only by the pre-delete cleanup stage waits for its PreDelete hooks to go",
			app: func() *v1alpha1.Application {
				a := deletingApp(time.Hour, PreDeleteFinalizer+"/cleanup")
				a.Status.Resources = nil
				return a
			}(), want: true, because: "waits for its PreDelete hooks to be deleted (pre-delete-finalizer/cleanup)"},
		{name: "an app held by the pre-delete finalizer deleted a moment ago is not stuck yet", app: preDeleting(time.Minute, "")},
		{name: "an app deleted a moment ago is not stuck yet", app: deletingApp(time.Minute, ResourcesFinalizer)},
		{name: "an app deleted without Argo CD's finalizers is none of this rule's business", app: deletingApp(time.Hour, "example.com/other")},
		{name: "an app that is not being deleted is fine", app: app(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := AppObservation{App: tt.app, HooksKnown: true}
			if tt.hooks != nil {
				obs.Hooks = tt.hooks(t)
			}
			fs := Evaluate(obs, now, th)
			if !tt.want {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			f := fs[0]
			require.Equal(t, syncmedic.RuleAppDeletionStuck, f.Rule)
			require.Contains(t, f.Summary, tt.because)
			if tt.notBecause != "" {
				require.NotContains(t, f.Summary, tt.notBecause)
			}
			require.Equal(t, tt.app.DeletionTimestamp.Time, f.Since)
			require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "removing an Application's finalizers orphans its resources: never automatic")
			require.Contains(t, f.Remedy.Commands[0], "argocd app resources argocd/shop")
			if tt.command != "" {
				require.Contains(t, f.Remedy.Commands[len(f.Remedy.Commands)-1], tt.command)
			}
			if tt.evidence.Field != "" {
				require.Contains(t, f.Evidence, tt.evidence)
			}
			t.Run("the watcher's trimmed copy keeps what the rule reads", func(t *testing.T) {
				d := decorated(tt.app)
				d.Status.Conditions = append(d.Status.Conditions, tt.app.Status.Conditions...)
				d.Status.Resources = tt.app.Status.Resources
				dobs := obs
				dobs.App = d
				full := Evaluate(dobs, now, th)
				require.Equal(t, f.Summary, full[0].Summary)
				dobs.App = Retained(d)
				require.Equal(t, full, Evaluate(dobs, now, th))
			})
		})
	}
}

func TestHookNotDeleted(t *testing.T) {
	th := DefaultThresholds()
	const waitingDeletion = "waiting for deletion of batch/Job/migrate"
	const running = "one or more tasks are running"
	tests := []struct {
		name    string
		msg     string
		hook    func(t *testing.T) *unstructured.Unstructured
		state   time.Duration // since the operation's last change
		want    syncmedic.RuleID
		command string
	}{
		{name: "an old hook never deleted (Server-Side Apply) is deleted through Argo CD by hand", msg: waitingDeletion,
			hook: func(t *testing.T) *unstructured.Unstructured { return hookJob(t, nil, nil, true) }, state: 10 * time.Minute,
			want: syncmedic.RuleHookNotDeleted, command: "argocd app delete-resource argocd/shop --kind Job --resource-name migrate --namespace shop --group batch"},
		{name: "v3 words it 'deletion of hook' and means the same", msg: "waiting for deletion of hook batch/Job/migrate",
			hook: func(t *testing.T) *unstructured.Unstructured { return hookJob(t, nil, nil, true) }, state: 10 * time.Minute,
			want: syncmedic.RuleHookNotDeleted, command: "argocd app delete-resource"},
		{name: "an old hook another controller's finalizer holds names that finalizer", msg: waitingDeletion,
			hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{"example.com/audit"}, ago(10*time.Minute), true)
			}, state: 10 * time.Minute, want: syncmedic.RuleHookNotDeleted, command: "jsonpath='{.metadata.finalizers}'"},
		{name: "an old hook held only by Argo CD's own finalizer is hook-finalizer-stuck's", msg: waitingDeletion,
			hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{HookFinalizer}, ago(10*time.Minute), true)
			}, state: 10 * time.Minute, want: syncmedic.RuleHookFinalizerStuck},
		{name: "an operation that started waiting a moment ago is given the threshold", msg: waitingDeletion,
			hook: func(t *testing.T) *unstructured.Unstructured { return hookJob(t, nil, nil, true) }, state: 10 * time.Second},
		{name: "an old hook already gone is no problem: the new one is created next", msg: waitingDeletion, state: 10 * time.Minute},
		{name: "the new hook this sync created while its message still waits for the old one's deletion is not the old hook",
			msg: "waiting for deletion of hook batch/Job/migrate", hook: func(t *testing.T) *unstructured.Unstructured {
				j := hookJob(t, []string{HookFinalizer}, nil, true)
				j.SetCreationTimestamp(*ago(2 * time.Second))
				return j
			}, state: 10 * time.Minute},
		{name: "the real controller's 'one or more tasks are running' with an old hook this sync deleted and another finalizer holds is reported",
			msg: running, hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{"example.com/audit"}, ago(10*time.Minute), true)
			}, state: 10 * time.Minute, want: syncmedic.RuleHookNotDeleted, command: "jsonpath='{.metadata.finalizers}'"},
		{name: "a held hook deleted before this sync started is not this sync's wait", msg: running,
			hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{"example.com/audit"}, ago(2*time.Hour), true)
			}, state: 10 * time.Minute},
		{name: "a held hook of an operation a sync window blocks is not what it waits for (v3.6.1 controller/sync.go:197)",
			msg: "Sync operation blocked by sync window", hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{"example.com/audit"}, ago(10*time.Minute), true)
			}, state: 10 * time.Minute},
		{name: "a held hook deleted a moment ago is given the threshold", msg: running,
			hook: func(t *testing.T) *unstructured.Unstructured {
				return hookJob(t, []string{"example.com/audit"}, ago(30*time.Second), true)
			}, state: 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := AppObservation{App: app(runningOp(time.Hour, tt.msg, "")), HooksKnown: true, StateSince: now.Add(-tt.state)}
			if tt.hook != nil {
				obs.Hooks = []*unstructured.Unstructured{tt.hook(t)}
			}
			fs := Evaluate(obs, now, th)
			if tt.want == "" {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			require.Equal(t, tt.want, fs[0].Rule)
			if tt.command != "" {
				require.Contains(t, fs[0].Remedy.Commands[0], tt.command)
				require.Equal(t, syncmedic.ActionNone, fs[0].Remedy.Action)
			}
		})
	}
}
