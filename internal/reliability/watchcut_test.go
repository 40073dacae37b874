package reliability

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/incident"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// runningOperation creates application app with an operation Running and no change: operation-stuck once the
// threshold passes.
//
// hand-written state: an empty tree and an operation Running with no change, on the in-process argocd-server, which
// runs no application-controller: the test cuts argocd-server's watch stream, and needs operations that get stuck
// and recover when it says (finishOperation). A real operation left Running (internal/conformance/argo
// TestSyncRunningItsHookIsNotStuck) recovers when its hook Pod ends, not on demand.
func runningOperation(t *testing.T, argo *testenv.ArgoCDServer, app string) {
	t.Helper()
	ns := argo.Env.Namespace(t)
	argo.CreateApplication(t, argo.NewApplication(app, ns))
	// hand-written state: the app's (empty) cached tree (see runningOperation's doc).
	argo.SetResources(t, app) // the controller caches a tree for every app; this one is empty
	// hand-written state: an operation Running that recovers when the test says (see runningOperation's doc).
	argo.SetOperationState(t, app, &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: testenv.Revision}},
		Phase:     synccommon.OperationRunning, Message: "waiting for healthy state of apps/Deployment/web",
		StartedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
	})
}

// finishOperation completes app's operation successfully, as the controller would once the sync goes through.
//
// hand-written state: the operation Succeeded at the moment the test chooses, for the reason runningOperation gives.
func finishOperation(t *testing.T, argo *testenv.ArgoCDServer, app string) {
	t.Helper()
	a := &v1alpha1.Application{}
	require.NoError(t, argo.Env.Client.Get(t.Context(), keyOf(argo.Namespace, app), a))
	st := a.Status.OperationState.DeepCopy()
	now := metav1.Now()
	st.Phase, st.Message, st.FinishedAt = synccommon.OperationSucceeded, "successfully synced (all tasks run)", &now
	// hand-written state: the Running operation finished on demand (see runningOperation's doc).
	argo.SetOperationState(t, app, st)
}

// keepCutting cuts every connection through p every interval until stop is closed; it returns how many cuts it made.
func keepCutting(p *testenv.Proxy, interval time.Duration, stop <-chan struct{}) <-chan int {
	n := make(chan int, 1)
	go func() {
		cuts := 0
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				n <- cuts
				return
			case <-tick.C:
				p.Cut()
				cuts++
			}
		}
	}()
	return n
}

// With the watch stream cut every 300ms while applications get stuck and recover: nothing is missed (every stuck
// application ends with exactly one open incident, every recovered one with exactly one resolved incident, healthy
// ones with none) and nothing is done twice (each hook finalizer is removed once, as the apiserver sees it).
func TestWatchStreamCutRepeatedlyMissesNothingAndDoesNothingTwice(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	proxy := testenv.NewProxy(t, argo.Addr)
	// A remedy cut mid-call fails and is retried after the policy's backoff, short here.
	p := startArgoPipeline(t, argo, proxy.Addr(), `resolveAfter: 1
defaults:
  rateLimit: {max: 10, window: 1m, backoff: 200ms, maxBackoff: 1s}
rules:
  argocd/hook-finalizer-stuck:
    mode: auto
`)
	stop := make(chan struct{})
	cuts := keepCutting(proxy, 300*time.Millisecond, stop)
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stop) })

	removals := countFinalizerRemovals(t, env)
	var leaked []*batchv1.Job
	for i := range 3 {
		// hand-written state: see runningOperation and leakedHook.
		runningOperation(t, argo, fmt.Sprintf("stuck-%d", i))
		// hand-written state: see runningOperation (an app that stays stuck).
		runningOperation(t, argo, fmt.Sprintf("recovers-%d", i))
		// hand-written state: see leakedHook.
		leaked = append(leaked, leakedHook(t, argo, fmt.Sprintf("fixed-%d", i)))
		argo.CreateApplication(t, argo.NewApplication(fmt.Sprintf("healthy-%d", i), env.Namespace(t)))
	}
	subject := func(app string) string { return argocd.Subject("", argo.Namespace, app) }
	require.Eventually(t, func() bool {
		for i := range 3 {
			if len(p.incidents(subject(fmt.Sprintf("recovers-%d", i)))) == 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the operations that will recover were found stuck first")
	for i := range 3 {
		// hand-written state: see finishOperation.
		finishOperation(t, argo, fmt.Sprintf("recovers-%d", i))
	}

	state := func(app string, open bool) (bool, string) {
		incs := p.incidents(subject(app))
		if len(incs) == 1 && incs[0].IsOpen() == open {
			return true, ""
		}
		var got []string
		for _, inc := range incs {
			got = append(got, fmt.Sprintf("%s %s attempts=%+v", inc.Finding.Rule, inc.State, inc.Attempts))
		}
		return false, fmt.Sprintf("%s: want one incident (open=%v), got %q", app, open, got)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		for i := range 3 {
			for app, open := range map[string]bool{fmt.Sprintf("stuck-%d", i): true, fmt.Sprintf("recovers-%d", i): false, fmt.Sprintf("fixed-%d", i): false} {
				if ok, why := state(app, open); !ok {
					return false, why
				}
			}
		}
		if removals.count() != len(leaked) {
			return false, fmt.Sprintf("%d hook finalizers removed, want %d", removals.count(), len(leaked))
		}
		return proxy.Cuts() >= 15, "keep cutting: at least 15 cuts while the applications are found and fixed"
	})
	stopOnce.Do(func() { close(stop) })
	n := <-cuts
	t.Logf("connections cut %d times; watcher stats %+v", n, p.watcher.Stats())

	t.Run("the stream really was re-opened many times", func(t *testing.T) {
		require.GreaterOrEqual(t, p.watcher.Stats().Reconnects, int64(3))
	})
	t.Run("stuck applications keep exactly one open incident each", func(t *testing.T) {
		for i := range 3 {
			incs := p.incidents(subject(fmt.Sprintf("stuck-%d", i)))
			require.Len(t, incs, 1)
			require.True(t, incs[0].IsOpen())
			require.Equal(t, syncmedic.RuleOperationStuck, incs[0].Finding.Rule)
		}
	})
	t.Run("each hook finalizer was removed once and its incident resolved", func(t *testing.T) {
		require.Equal(t, len(leaked), removals.count())
		for i := range 3 {
			incs := p.incidents(subject(fmt.Sprintf("fixed-%d", i)))
			require.Len(t, incs, 1)
			real := realAttempts(incs[0])
			require.NotEmpty(t, real)
			require.Equal(t, incident.ResultSucceeded, real[len(real)-1].Result)
			changed := 0
			for _, a := range real {
				if a.Changed {
					changed++
				}
			}
			require.LessOrEqual(t, changed, 1, "at most one attempt reports it changed something: %+v", real)
		}
	})
	t.Run("healthy applications were never flagged", func(t *testing.T) {
		for i := range 3 {
			require.Empty(t, p.incidents(subject(fmt.Sprintf("healthy-%d", i))))
		}
	})
}
