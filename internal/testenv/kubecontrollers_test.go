package testenv

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testJob(name string, ttl *int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ttl,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
}

func TestRealControllersRunJobsTheWayAClusterDoes(t *testing.T) {
	env := KubeWithControllers(t)
	ctx := context.Background()

	t.Run("a Job whose Pod the kubelet succeeds completes, is deleted by its TTL, and its Pods are collected", func(t *testing.T) {
		ns := env.Namespace(t)
		env.Kubelet(t, ns, func(*corev1.Pod) (corev1.PodPhase, bool) { return corev1.PodSucceeded, true })
		job := testJob("fast", ptr.To[int32](0))
		job.Namespace = ns
		require.NoError(t, env.Client.Create(ctx, job))
		require.Eventually(t, func() bool {
			_, err := env.Clientset.BatchV1().Jobs(ns).Get(ctx, "fast", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, defaultWait, pollEvery, "the TTL-after-finished controller never deleted the completed Job")
		require.Eventually(t, func() bool {
			pods, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0
		}, defaultWait, pollEvery, "the garbage collector never deleted the Job's Pods")
	})

	t.Run("a Job whose Pod the kubelet fails is marked Failed and stays without a TTL", func(t *testing.T) {
		ns := env.Namespace(t)
		env.Kubelet(t, ns, func(*corev1.Pod) (corev1.PodPhase, bool) { return corev1.PodFailed, true })
		job := testJob("failing", nil)
		job.Namespace = ns
		require.NoError(t, env.Client.Create(ctx, job))
		require.Eventually(t, func() bool {
			got, err := env.Clientset.BatchV1().Jobs(ns).Get(ctx, "failing", metav1.GetOptions{})
			return err == nil && jobCondition(got, batchv1.JobFailed)
		}, defaultWait, pollEvery, "the Job controller never marked the Job Failed")
	})

	t.Run("a Job whose Pod the kubelet holds keeps running until the test lets it finish", func(t *testing.T) {
		ns := env.Namespace(t)
		var release atomic.Bool
		k := env.Kubelet(t, ns, func(*corev1.Pod) (corev1.PodPhase, bool) {
			if release.Load() {
				return corev1.PodSucceeded, true
			}
			return corev1.PodRunning, true
		})
		job := testJob("slow", nil)
		job.Namespace = ns
		require.NoError(t, env.Client.Create(ctx, job))
		require.Eventually(t, func() bool {
			got, err := env.Clientset.BatchV1().Jobs(ns).Get(ctx, "slow", metav1.GetOptions{})
			return err == nil && got.Status.Active == 1 && ptr.Deref(got.Status.Ready, 0) == 1
		}, defaultWait, pollEvery, "the Job never had one ready Pod")
		release.Store(true)
		k.Poke()
		require.Eventually(t, func() bool {
			got, err := env.Clientset.BatchV1().Jobs(ns).Get(ctx, "slow", metav1.GetOptions{})
			return err == nil && jobCondition(got, batchv1.JobComplete)
		}, defaultWait, pollEvery, "the Job never completed after its Pod succeeded")
	})

	t.Run("a deleted namespace is emptied and removed by the namespace controller", func(t *testing.T) {
		ns := env.Namespace(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}
		require.NoError(t, env.Client.Create(ctx, cm))
		require.NoError(t, env.Clientset.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		require.Eventually(t, func() bool {
			_, err := env.Clientset.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, defaultWait, pollEvery, "the namespace was never removed")
	})
}
