package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// HookFinalizer is the finalizer Argo CD v2.14.3 and v3.x put on hook resources.
const HookFinalizer = "argocd.argoproj.io/hook-finalizer"

// HookJob describes a hook Job for the scenario builders.
type HookJob struct {
	// Name of the Job; default "migrate".
	Name string
	// Namespace of the Job (required).
	Namespace string
	// App is the Argo CD application that owns the hook (app.kubernetes.io/instance label); may be empty.
	App string
	// Hook is the hook type annotation (argocd.argoproj.io/hook); default PreSync.
	Hook synccommon.HookType
	// Finalizer adds argocd.argoproj.io/hook-finalizer.
	Finalizer bool
}

func (h HookJob) object() *batchv1.Job {
	if h.Name == "" {
		h.Name = "migrate"
	}
	if h.Hook == "" {
		h.Hook = synccommon.HookTypePreSync
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace,
			Annotations: map[string]string{
				synccommon.AnnotationKeyHook:             string(h.Hook),
				synccommon.AnnotationKeyHookDeletePolicy: string(synccommon.HookDeletePolicyBeforeHookCreation),
			}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: "busybox:1.36", Command: []string{"true"}}},
		}}},
	}
	if h.App != "" {
		job.Labels = map[string]string{"app.kubernetes.io/instance": h.App}
	}
	if h.Finalizer {
		job.Finalizers = []string{HookFinalizer}
	}
	return job
}

// ScenarioHookFinalizerStuck creates a hook Job carrying argocd.argoproj.io/hook-finalizer and deletes it, so it
// is really stuck terminating (deletionTimestamp set, finalizer left, nobody to remove it). It returns the Job as
// read back from the apiserver.
func ScenarioHookFinalizerStuck(t testing.TB, env *Env, hook HookJob) *batchv1.Job {
	t.Helper()
	hook.Finalizer = true
	job := hook.object()
	ctx := context.Background()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("testenv: creating hook Job: %v", err)
	}
	if err := env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("testenv: deleting hook Job: %v", err)
	}
	got := &batchv1.Job{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatalf("testenv: reading hook Job back: %v", err)
	}
	if got.DeletionTimestamp == nil {
		t.Fatalf("testenv: hook Job %s/%s is not terminating", got.Namespace, got.Name)
	}
	return got
}

// CreateCompletedJob creates a hook Job and writes a finished status through the status subresource, as the Job
// controller would (there is none in the test apiserver): Complete=True, or Failed=True when failed is set.
func CreateCompletedJob(t testing.TB, env *Env, hook HookJob, failed bool) *batchv1.Job {
	t.Helper()
	job := hook.object()
	ctx := context.Background()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("testenv: creating Job: %v", err)
	}
	start := metav1.NewTime(job.CreationTimestamp.Add(time.Second))
	end := metav1.NewTime(start.Add(2 * time.Second))
	job.Status = batchv1.JobStatus{StartTime: &start}
	var conds []batchv1.JobCondition
	if failed {
		job.Status.Failed = 1
		conds = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"},
			{Type: batchv1.JobFailed, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"},
		}
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &end
		conds = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods"},
			{Type: batchv1.JobComplete, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods"},
		}
	}
	for _, c := range conds {
		c.Status, c.LastProbeTime, c.LastTransitionTime = corev1.ConditionTrue, end, end
		job.Status.Conditions = append(job.Status.Conditions, c)
	}
	// hand-written state: CreateCompletedJob's status, as the Job controller writes it (the harness's apiserver runs
	// none); callers say why.
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatalf("testenv: writing Job status: %v", err)
	}
	return job
}

// HookCompletionMissed is the seed incident "operation Running, waiting for a hook Job that already finished".
type HookCompletionMissed struct {
	App *v1alpha1.Application
	Job *batchv1.Job
}

// ScenarioHookCompletionMissed creates, in a fresh destination namespace, a PreSync hook Job whose status is
// Complete and an Application whose sync operation (started startedAgo before now) is still Running, waiting for
// that hook; the Job is in the app's resource tree, so GetResource and PatchResource reach it.
//
// hand-written state: the operation Running, waiting for a hook Job that completed, started startedAgo (up to
// hours) before now, on the in-process argocd-server, which runs no application-controller. The real v2.14.21
// controller reaches the same state by the fast-Job race in internal/conformance/argo TestFastHookJobWithTTLZero
// and TestSlowAndFastHookWaveLosesTheFastHookOnV2, but only started seconds ago and at the cost of a real stack;
// callers say why they need this one.
func ScenarioHookCompletionMissed(t testing.TB, argo *ArgoCDServer, appName string, startedAgo time.Duration) HookCompletionMissed {
	t.Helper()
	ns := argo.Env.Namespace(t)
	// hand-written state: the completed hook Job of ScenarioHookCompletionMissed (see its doc).
	job := CreateCompletedJob(t, argo.Env, HookJob{Namespace: ns, App: appName}, false)
	argo.CreateApplication(t, argo.NewApplication(appName, ns))
	started := metav1.NewTime(time.Now().Add(-startedAgo).Truncate(time.Second))
	msg := fmt.Sprintf("waiting for completion of hook batch/Job/%s", job.Name)
	state := &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{
			Sync:        &v1alpha1.SyncOperation{Revision: Revision},
			InitiatedBy: v1alpha1.OperationInitiator{Automated: true},
			Retry:       v1alpha1.RetryStrategy{Limit: 5},
		},
		Phase:     synccommon.OperationRunning,
		Message:   msg,
		StartedAt: started,
		SyncResult: &v1alpha1.SyncOperationResult{
			Revision: Revision,
			Source:   *argo.NewApplication(appName, ns).Spec.Source,
			Resources: v1alpha1.ResourceResults{{
				Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: job.Name,
				HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationRunning,
				SyncPhase: synccommon.SyncPhasePreSync, Message: "job.batch/" + job.Name + " created",
			}},
		},
	}
	// hand-written state: the hook in the app's cached tree (see ScenarioHookCompletionMissed's doc).
	argo.SetResources(t, appName, job)
	// hand-written state: the operation Running, waiting for the completed hook (see ScenarioHookCompletionMissed's
	// doc).
	app := argo.SetOperationState(t, appName, state)
	return HookCompletionMissed{App: app, Job: job}
}

// GetJob reads a Job back from the apiserver.
func GetJob(t testing.TB, env *Env, namespace, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, job); err != nil {
		t.Fatalf("testenv: reading Job %s/%s: %v", namespace, name, err)
	}
	return job
}

func clientKey(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
