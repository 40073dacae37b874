package reliability

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// leakedHook creates, in a fresh destination namespace, application app whose sync succeeded and a hook Job the
// controller deleted afterwards but whose argocd.argoproj.io/hook-finalizer it leaked (argo-cd #24187): the Job
// stays terminating. It returns the Job as stored.
//
// hand-written state: the resource tree and a Succeeded operation, on the in-process argocd-server, which runs no
// application-controller: the reliability tests inject faults (kills, failovers, cut streams, Slack outages) around
// syncmedic, and a real stack would add a minute and its own timing to each. The real v3.0.12 controller leaks the
// hook finalizer after a failed wave in internal/conformance/argo TestHookFinalizerLeakedByAFailedWave.
func leakedHook(t *testing.T, argo *testenv.ArgoCDServer, app string) *batchv1.Job {
	t.Helper()
	ns := argo.Env.Namespace(t)
	argo.CreateApplication(t, argo.NewApplication(app, ns))
	job := testenv.ScenarioHookFinalizerStuck(t, argo.Env, testenv.HookJob{Namespace: ns, App: app})
	// hand-written state: the leaked hook in the app's cached tree (see leakedHook's doc).
	argo.SetResources(t, app, job)
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	// hand-written state: the finished operation that leaked the hook (see leakedHook's doc).
	argo.SetOperationState(t, app, &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: testenv.Revision}},
		Phase:     synccommon.OperationSucceeded, Message: "successfully synced (all tasks run)",
		StartedAt: started, FinishedAt: &started,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: testenv.Revision, Resources: v1alpha1.ResourceResults{{
			Group: "batch", Version: "v1", Kind: "Job", Namespace: ns, Name: job.Name,
			HookType: synccommon.HookTypePreSync, HookPhase: synccommon.OperationSucceeded, SyncPhase: synccommon.SyncPhasePreSync,
		}}},
	})
	return job
}

// finalizerRemovals counts, from the apiserver's own watch of every Job written after it started, how many writes
// took the hook finalizer off a Job: the number of times a remove-hook-finalizer remedy really landed.
type finalizerRemovals struct {
	mu    sync.Mutex
	n     int
	state map[string]bool // Job → has the finalizer
}

func countFinalizerRemovals(t *testing.T, env *testenv.Env) *finalizerRemovals {
	t.Helper()
	c := &finalizerRemovals{state: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := env.Clientset.BatchV1().Jobs("").List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err)
	w, err := env.Clientset.BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			key := job.Namespace + "/" + job.Name
			has := slices.Contains(job.Finalizers, testenv.HookFinalizer) && ev.Type != watch.Deleted
			c.mu.Lock()
			if c.state[key] && !has {
				c.n++
			}
			c.state[key] = has
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *finalizerRemovals) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// eventsWithReason lists the Kubernetes Events in namespace with reason.
func eventsWithReason(t *testing.T, env *testenv.Env, namespace, reason string) []corev1.Event {
	t.Helper()
	list, err := env.Clientset.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func keyOf(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
