package main

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// The default mode splits testenv.ScenarioRealHookHeldByForeignFinalizer in two, so that the stuck conditions
// appear on a settled stack rather than amid the creation of new applications: prepareStuck creates every app and
// runs its first sync (its PreSync hook Job succeeds); triggerStuck then, one app every interval, puts the foreign
// finalizer on the finished hook Job and starts the second sync, which the real controller makes wait for the
// hook's deletion.

// heldHook is the hook of the scenario (testenv's: PreSync, default delete policy BeforeHookCreation).
var heldHook = testenv.RealHook{Name: "migrate", Hook: synccommon.HookTypePreSync, Run: testenv.PodSucceeds}

// prepareStuck creates n apps, parallel at a time, and waits for each first sync to succeed. An app whose first sync
// fails is reported and left out.
func prepareStuck(t testing.TB, stack *testenv.RealArgoCD, n, parallel int) []*testenv.RealHookApp {
	t.Helper()
	var (
		mu   sync.Mutex
		out  []*testenv.RealHookApp
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)) <= n {
				done := make(chan struct{})
				go func() { // a Fatal ends this goroutine only
					defer close(done)
					app := testenv.NewRealHookApp(t, stack, "held-hook", testenv.ConfigMapData{}, heldHook)
					app.Sync(t)
					got, ok := app.WaitApp(t, 5*time.Minute, testenv.OperationCompleted)
					if !ok || got.Status.OperationState.Phase != synccommon.OperationSucceeded {
						t.Errorf("the first sync of %s did not succeed within 5m: %s", app.Name, testenv.DescribeOperation(got))
						return
					}
					mu.Lock()
					out = append(out, app)
					progress("  prepared %d/%d: %s", len(out), n, app.Name)
					mu.Unlock()
				}()
				<-done
			}
		}()
	}
	wg.Wait()
	if len(out) == 0 {
		t.Fatalf("no stuck application could be prepared")
	}
	slices.SortFunc(out, func(a, b *testenv.RealHookApp) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// triggerStuck makes each app stuck, one every interval: the foreign finalizer on its finished hook Job, then the
// second sync.
func triggerStuck(t testing.TB, apps []*testenv.RealHookApp, every time.Duration) []stuckApp {
	t.Helper()
	out := make([]stuckApp, 0, len(apps))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i, app := range apps {
		if i > 0 {
			<-tick.C
		}
		holdHook(t, app)
		start := time.Now()
		app.Sync(t)
		out = append(out, stuckApp{app: app, secondSync: start})
	}
	return out
}

// holdHook adds testenv.ForeignFinalizer to the app's finished hook Job, as another controller would.
func holdHook(t testing.TB, app *testenv.RealHookApp) {
	t.Helper()
	key := client.ObjectKey{Namespace: app.Namespace, Name: heldHook.Name}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &batchv1.Job{}
		if err := app.Stack.Env.Client.Get(context.Background(), key, job); err != nil {
			return err
		}
		if !slices.Contains(job.Finalizers, testenv.ForeignFinalizer) {
			job.Finalizers = append(job.Finalizers, testenv.ForeignFinalizer)
		}
		return app.Stack.Env.Client.Update(context.Background(), job)
	})
	if err != nil {
		t.Fatalf("holding Job %s: %v", key, err)
	}
}
