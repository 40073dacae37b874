package testenv

import (
	"context"
	"os"
	"strings"
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

// realKubeletRequested reports whether SYNCMEDIC_TESTENV_KUBELET=real asks the scenarios that can run either way
// to run their Pods on the real node (RealNode) instead of the played kubelet (Env.Kubelet), which stays the default
// until the scenarios move to the node (issue 28).
func realKubeletRequested() bool { return os.Getenv("SYNCMEDIC_TESTENV_KUBELET") == "real" }

// jobPods is where the Pods of a test Job run: the played kubelet of KubeWithControllers, which moves them to the
// phase the test chose, or the real node, where the container exits 0 (`true`) or 1.
type jobPods struct {
	env  *Env
	real bool
}

func newJobPods(t *testing.T) jobPods {
	if realKubeletRequested() {
		return jobPods{env: RealNode(t).Env, real: true}
	}
	return jobPods{env: KubeWithControllers(t)}
}

// create creates job in a fresh namespace, its Pods succeeding or failing, and returns the namespace.
func (p jobPods) create(t *testing.T, job *batchv1.Job, succeed bool) string {
	ns := p.env.Namespace(t)
	phase, command := corev1.PodSucceeded, []string{"true"}
	if !succeed {
		phase, command = corev1.PodFailed, []string{"sh", "-c", "exit 1"}
	}
	if p.real {
		c := &job.Spec.Template.Spec.Containers[0]
		c.Image, c.ImagePullPolicy, c.Command = NodeBusyboxImage, corev1.PullNever, command
	} else {
		p.env.Kubelet(t, ns, func(*corev1.Pod) (corev1.PodPhase, bool) { return phase, true })
	}
	job.Namespace = ns
	require.NoError(t, p.env.Client.Create(context.Background(), job))
	return ns
}

func TestRealControllersRunJobsTheWayAClusterDoes(t *testing.T) {
	env := KubeWithControllers(t)
	ctx := context.Background()

	// These two run on the real node with SYNCMEDIC_TESTENV_KUBELET=real (the waits are longer there: containers
	// really start).
	t.Run("a Job whose Pod the kubelet succeeds completes, is deleted by its TTL, and its Pods are collected", func(t *testing.T) {
		pods := newJobPods(t)
		ns := pods.create(t, testJob("fast", ptr.To[int32](0)), true)
		require.Eventually(t, func() bool {
			_, err := pods.env.Clientset.BatchV1().Jobs(ns).Get(ctx, "fast", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, nodeWait, pollEvery, "the TTL-after-finished controller never deleted the completed Job")
		require.Eventually(t, func() bool {
			list, err := pods.env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0
		}, nodeWait, pollEvery, "the garbage collector never deleted the Job's Pods")
	})

	t.Run("a Job whose Pod the kubelet fails is marked Failed and stays without a TTL", func(t *testing.T) {
		pods := newJobPods(t)
		ns := pods.create(t, testJob("failing", nil), false)
		require.Eventually(t, func() bool {
			got, err := pods.env.Clientset.BatchV1().Jobs(ns).Get(ctx, "failing", metav1.GetOptions{})
			return err == nil && jobCondition(got, batchv1.JobFailed)
		}, nodeWait, pollEvery, "the Job controller never marked the Job Failed")
		if pods.real {
			// The container really ran and exited 1.
			list, err := pods.env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
			require.Equal(t, corev1.PodFailed, list.Items[0].Status.Phase)
			require.Equal(t, nodeName, list.Items[0].Spec.NodeName)
			require.True(t, strings.HasPrefix(list.Items[0].Status.ContainerStatuses[0].ContainerID, "containerd://"),
				"no container of the node ran: %+v", list.Items[0].Status.ContainerStatuses[0])
			term := list.Items[0].Status.ContainerStatuses[0].State.Terminated
			require.NotNil(t, term)
			require.Equal(t, int32(1), term.ExitCode)
		}
		got, err := pods.env.Clientset.BatchV1().Jobs(ns).Get(ctx, "failing", metav1.GetOptions{})
		require.NoError(t, err, "the failed Job without a TTL was deleted")
		require.Nil(t, got.Spec.TTLSecondsAfterFinished)
	})

	t.Run("a Job whose Pod the kubelet holds keeps running until the test lets it finish", func(t *testing.T) {
		// The played kubelet itself under test (a Pod held Running, then moved to Succeeded at the test's moment):
		// the scenarios that still play the kubelet rely on exactly this interleaving.
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
