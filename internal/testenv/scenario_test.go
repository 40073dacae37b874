package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	applicationpkg "github.com/syncmedic/syncmedic/internal/argoapi/application"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

func TestScenariosInTheApiserver(t *testing.T) {
	env := Kube(t)
	ctx := context.Background()

	t.Run("a deleted hook Job with the hook finalizer stays terminating", func(t *testing.T) {
		job := ScenarioHookFinalizerStuck(t, env, HookJob{Namespace: env.Namespace(t), App: "db"})
		require.NotNil(t, job.DeletionTimestamp)
		require.Equal(t, []string{HookFinalizer}, job.Finalizers)
		require.Equal(t, "PreSync", job.Annotations[synccommon.AnnotationKeyHook])
	})

	t.Run("a failed Workflow with the artifact-gc finalizer stays terminating", func(t *testing.T) {
		// hand-written state: the scenario builder's own test: a failed Workflow held by artifact-gc: no Argo Workflows
		// controller runs in these tests (the real v3.5.10 produces it in internal/conformance/workflows
		// TestArtifactGCFinalizerOfAFailedWorkflowWithoutArtifacts), so its status is written as the workflow-controller writes it.
		wf := ScenarioWorkflowArtifactGCStuck(t, env, env.Namespace(t), "build")
		require.NotNil(t, wf.GetDeletionTimestamp())
		require.Equal(t, []string{ArtifactGCFinalizer}, wf.GetFinalizers())
		phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
		require.Equal(t, "Failed", phase)
	})

	t.Run("a Namespace-owned webhook whose Service is gone blocks writes in its namespace", func(t *testing.T) {
		s := ScenarioWebhookBackendGone(t, env)
		owner := s.Webhook.OwnerReferences[0]
		require.Equal(t, "Namespace", owner.Kind)
		require.True(t, *owner.Controller)
		_, err := env.Clientset.CoreV1().Services(s.Namespace.Name).Get(ctx, s.Service, metav1.GetOptions{})
		require.Error(t, err)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config-network", Namespace: s.Namespace.Name}}
		require.ErrorContains(t, env.Client.Create(ctx, cm), "failed calling webhook")
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unaffected", Namespace: env.Namespace(t)}}
		require.NoError(t, env.Client.Create(ctx, other))
	})

	for _, version := range []string{"v2beta1", "v2beta2"} {
		t.Run("a HelmRelease written through "+version+" keeps its old-format status", func(t *testing.T) {
			// hand-written state: this test proves ScenarioHelmReleaseOldStatus itself.
			hr := ScenarioHelmReleaseOldStatus(t, env, env.Namespace(t), "podinfo", version)
			require.Equal(t, int64(2), hr.Generation)
			require.Equal(t, int64(1), hr.Status.ObservedGeneration)
			require.Empty(t, hr.Status.History)
			require.True(t, conditions.IsReady(hr))
			require.Equal(t, "Release reconciliation succeeded", conditions.GetMessage(hr, meta.ReadyCondition))
		})
	}

	t.Run("a HelmRelease says DependencyNotReady while its dependency is Ready", func(t *testing.T) {
		// hand-written state: this test proves ScenarioDependencyNotReady itself.
		s := ScenarioDependencyNotReady(t, env, env.Namespace(t))
		require.True(t, conditions.IsReady(s.Dependency))
		require.Equal(t, s.Dependency.Generation, s.Dependency.Status.ObservedGeneration)
		require.Equal(t, meta.DependencyNotReadyReason, conditions.GetReason(s.Dependent, meta.ReadyCondition))
		require.Equal(t, "db", s.Dependent.Spec.DependsOn[0].Name)
	})
}

func TestScenarioHookCompletionMissed(t *testing.T) {
	env := Kube(t)
	argo := ArgoCD(t, env, ArgoCDOptions{DisableAuth: true})
	// hand-written state: this test proves ScenarioHookCompletionMissed itself (an operation Running for 2 hours).
	s := ScenarioHookCompletionMissed(t, argo, "kyverno", 2*time.Hour)
	apps := argo.Applications(t, "")
	ctx := context.Background()

	t.Run("the API shows a Running operation waiting on the hook", func(t *testing.T) {
		require.Eventually(t, func() bool {
			app, err := apps.Get(ctx, &applicationpkg.ApplicationQuery{Name: ptr.To("kyverno")})
			return err == nil && app.Status.OperationState != nil &&
				app.Status.OperationState.Phase == synccommon.OperationRunning
		}, defaultWait, pollEvery)
		require.Contains(t, s.App.Status.OperationState.Message, "waiting for completion of hook batch/Job/migrate")
	})

	t.Run("the hook Job behind it is Complete", func(t *testing.T) {
		job := GetJob(t, env, s.Job.Namespace, s.Job.Name)
		require.True(t, jobCondition(job, batchv1.JobComplete))
		tree, err := apps.ResourceTree(ctx, &applicationpkg.ResourcesQuery{ApplicationName: ptr.To("kyverno")})
		require.NoError(t, err)
		require.Len(t, tree.Nodes, 1)
		require.Equal(t, string(job.UID), tree.Nodes[0].UID)
	})

	t.Run("terminate, then sync once the controller finished the operation", func(t *testing.T) {
		_, err := apps.TerminateOperation(ctx, &applicationpkg.OperationTerminateRequest{Name: ptr.To("kyverno")})
		require.NoError(t, err)
		// hand-written state: what the application controller does with a Terminating operation; the in-process
		// argocd-server runs none (the real v2.14.21 controller does it in internal/conformance/argo
		// TestFastHookJobWithTTLZero).
		state := s.App.Status.OperationState.DeepCopy()
		state.Phase, state.Message = synccommon.OperationFailed, "Operation terminated"
		state.FinishedAt = ptr.To(metav1.Now())
		argo.SetOperationState(t, "kyverno", state)
		require.Eventually(t, func() bool {
			_, err := apps.Sync(ctx, &applicationpkg.ApplicationSyncRequest{Name: ptr.To("kyverno"), Revision: ptr.To(Revision)})
			return err == nil
		}, defaultWait, pollEvery)
		app := &v1alpha1.Application{}
		require.NoError(t, env.Client.Get(ctx, clientKey(argo.Namespace, "kyverno"), app))
		require.NotNil(t, app.Operation)
		require.Equal(t, Revision, app.Operation.Sync.Revision)
	})
}

func jobCondition(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
