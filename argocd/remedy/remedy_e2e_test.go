package remedy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/remedy"
	"github.com/syncmedic/syncmedic/argocd/rules"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

const keepFinalizer = "example.com/keep"

// heldHook creates app's PreSync hook Job carrying finalizers, deletes it (so it is stuck terminating) and records
// it as the application's resource, as the controller's cache would.
//
// hand-written state: the resource tree, on the in-process argocd-server, which runs no application-controller:
// the tests are about the finalizer patch argocd-server applies. The real controllers hold such a hook in
// internal/conformance/argo TestRemovingAHookFinalizerFollowsAFinalizerListThatMoved.
func heldHook(t *testing.T, argo *testenv.ArgoCDServer, app, ns string, finalizers ...string) *batchv1.Job {
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns, Finalizers: finalizers,
			Labels:      map[string]string{"app.kubernetes.io/instance": app},
			Annotations: map[string]string{synccommon.AnnotationKeyHook: string(synccommon.HookTypePreSync)}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "migrate:1"}}}}},
	}
	require.NoError(t, argo.Env.Client.Create(ctx, job))
	require.NoError(t, argo.Env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.NoError(t, argo.Env.Client.Get(ctx, client.ObjectKeyFromObject(job), job))
	job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	// hand-written state: the held hook in the app's cached tree (see heldHook's doc: the in-process argocd-server runs
	// no application-controller).
	argo.SetResources(t, app, job)
	return job
}

// finalizerFinding is what the rule reports about the held hook (threshold 0).
func finalizerFinding(t *testing.T, argo *testenv.ArgoCDServer, app string, job *batchv1.Job) syncmedic.Finding {
	a, err := getApp(argo, app)
	require.NoError(t, err)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	require.NoError(t, err)
	obs := rules.AppObservation{App: a, HooksKnown: true, Hooks: []*unstructured.Unstructured{{Object: m}}}
	fs := rules.HookFinalizerStuck(obs, time.Now(), rules.Thresholds{})
	require.Len(t, fs, 1)
	return fs[0]
}

func setFinalizers(t *testing.T, env *testenv.Env, job *batchv1.Job, finalizers ...string) {
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &batchv1.Job{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		cur.Finalizers = finalizers
		return env.Client.Update(context.Background(), cur)
	}))
}

func TestFinalizerPatchReadsTheObjectAgainWhenItsTestFails(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	c := dial(t, argo.Addr, argo.AdminToken(t))
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	remove := rem.Remediers()[syncmedic.ActionRemoveHookFinalizer]

	tests := []struct {
		name string
		// before changes the finalizers between the finding and the remedy.
		before         func(t *testing.T, job *batchv1.Job)
		changed        bool
		step           string
		wantGone       bool
		wantFinalizers []string
	}{
		{
			name:     "a finalizer that moved in the list is removed at its new index",
			before:   func(t *testing.T, job *batchv1.Job) { setFinalizers(t, env, job, rules.HookFinalizer) },
			changed:  true,
			step:     "the finalizer list had changed",
			wantGone: true,
		},
		{
			name:           "a finalizer already removed by someone else is success with nothing changed",
			before:         func(t *testing.T, job *batchv1.Job) { setFinalizers(t, env, job, keepFinalizer) },
			step:           "no longer has " + rules.HookFinalizer,
			wantFinalizers: []string{keepFinalizer},
		},
		{
			name:    "an unchanged list is patched at once",
			before:  func(*testing.T, *batchv1.Job) {},
			changed: true,
			step:    "removed " + rules.HookFinalizer,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := "held-" + string(rune('a'+i))
			ns := env.Namespace(t)
			argo.CreateApplication(t, argo.NewApplication(app, ns))
			// hand-written state: see heldHook.
			job := heldHook(t, argo, app, ns, keepFinalizer, rules.HookFinalizer)
			f := finalizerFinding(t, argo, app, job)
			require.Contains(t, f.Remedy.Params[rules.ParamPatch], "/metadata/finalizers/1")
			tt.before(t, job)

			out, err := remove.Remediate(context.Background(), f, false)
			require.NoError(t, err, "steps: %v", out.Steps)
			require.Equal(t, tt.changed, out.Changed, "steps: %v", out.Steps)
			require.Contains(t, out.Steps[0], tt.step)
			if tt.wantGone {
				require.Eventually(t, func() bool { return jobGone(argo, ns, "migrate") }, 10*time.Second, 20*time.Millisecond)
			} else {
				cur := &batchv1.Job{}
				require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur))
				want := tt.wantFinalizers
				if want == nil {
					want = []string{keepFinalizer}
				}
				require.Equal(t, want, cur.Finalizers, "only the hook finalizer is ever removed")
			}

			again, err := remove.Remediate(context.Background(), f, false)
			require.NoError(t, err, "a re-run changes nothing and does not fail: %v", again.Steps)
			require.False(t, again.Changed)
		})
	}
}

func TestTerminateIsNotAttemptedWhileASyncWindowBlocksTheResync(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	c := dial(t, argo.Addr, argo.AdminToken(t))
	rem, err := remedy.NewRemedies(remedy.RemedierOptions{Client: c, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)

	// A deny window open now, for every application of the project: manual syncs are refused.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		proj := &v1alpha1.AppProject{}
		if err := env.Client.Get(context.Background(), keyOf(argo.Namespace, "default"), proj); err != nil {
			return err
		}
		proj.Spec.SyncWindows = v1alpha1.SyncWindows{{Kind: "deny", Schedule: "* * * * *", Duration: "1h",
			Applications: []string{"*"}, ManualSync: false}}
		return env.Client.Update(context.Background(), proj)
	}))

	ns := env.Namespace(t)
	app := "windowed"
	argo.CreateApplication(t, argo.NewApplication(app, ns))
	// hand-written state: an empty tree and an operation Running, waiting for a hook. The in-process harness runs no
	// application-controller, so they are written as the controller writes them; the real v2.14.21 controller loses
	// a hook under a deny window in internal/conformance/argo TestSyncWindowHoldsTheTerminateOfALostHook.
	argo.SetResources(t, app)
	op := waitingOp("waiting for completion of hook batch/Job/migrate", synccommon.OperationRunning, ns)
	// hand-written state: the operation Running, waiting for a hook, for the same reason as the empty tree above (the
	// in-process argocd-server runs no application-controller).
	argo.SetOperationState(t, app, op)
	a, err := getApp(argo, app)
	require.NoError(t, err)
	obs := rules.AppObservation{App: a, HooksKnown: true}
	fs := rules.HookCompletionMissed(obs, time.Now().Add(time.Hour), rules.Thresholds{})
	require.Len(t, fs, 1)
	ops := argo.CountOperations(t, app)

	require.Eventually(t, func() bool {
		out, err := rem.Remediers()[syncmedic.ActionTerminateAndResync].Remediate(context.Background(), fs[0], false)
		if err == nil {
			t.Fatalf("the remedy went ahead under a deny window: %v", out.Steps)
		}
		// The project update reaches argocd-server's informer within moments.
		return !syncmedic.IsPermanent(err) && containsAll(err.Error(), "sync window", "blocks unattended syncs") && !out.Changed
	}, 10*time.Second, 100*time.Millisecond)

	after, err := getApp(argo, app)
	require.NoError(t, err)
	require.Equal(t, synccommon.OperationRunning, after.Status.OperationState.Phase, "the operation was left running")
	term, syncs := ops.Counts()
	require.Zero(t, term, "nothing was terminated")
	require.Zero(t, syncs, "nothing was synced")
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
