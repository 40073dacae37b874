package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// stuckApp is one application made stuck by the real controller.
type stuckApp struct {
	app *testenv.RealHookApp
	// secondSync is when its second sync (the one that waits for the held hook) was requested.
	secondSync time.Time
}

// makeStuck runs testenv.ScenarioRealHookHeldByForeignFinalizer n times, parallel at a time: each app's first sync
// runs its PreSync hook, a foreign finalizer then holds the finished hook Job, and a second sync waits for its
// deletion. A scenario that fails is reported and left out; makeStuck fails only when none succeeded.
func makeStuck(t testing.TB, stack *testenv.RealArgoCD, n, parallel int) []stuckApp {
	t.Helper()
	var (
		mu   sync.Mutex
		out  []stuckApp
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)) <= n {
				done := make(chan struct{})
				go func() { // a scenario's Fatal ends this goroutine only
					defer close(done)
					app, start := testenv.ScenarioRealHookHeldByForeignFinalizer(t, stack)
					mu.Lock()
					out = append(out, stuckApp{app: app, secondSync: start})
					progress("  stuck %d/%d: %s (second sync at %s)", len(out), n, app.Name, start.Format("15:04:05.000"))
					mu.Unlock()
				}()
				<-done
			}
		}()
	}
	wg.Wait()
	if len(out) == 0 {
		t.Fatalf("no stuck application could be set up")
	}
	return out
}

// opWatch notes, from a watch of the apiserver independent of argocd-server and syncmedic, when each stuck
// application's operation state last changed (the fields syncmedic's watcher compares: phase, start, message, and
// each synced resource's hook phase and status).
type opWatch struct {
	mu      sync.Mutex
	changed map[string][]change
}

type change struct {
	at  time.Time
	sig string
}

func startOpWatch(t testing.TB, stack *testenv.RealArgoCD) *opWatch {
	t.Helper()
	c, err := client.NewWithWatch(stack.Env.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &v1alpha1.ApplicationList{}, client.InNamespace(stack.Namespace), client.HasLabels{testenv.RealAppLabel})
	if err != nil {
		cancel()
		t.Fatalf("watching applications: %v", err)
	}
	o := &opWatch{changed: map[string][]change{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			app, ok := testenv.ArgoApplication(ev.Object)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			at := time.Now()
			sig := rules.OperationSignature(app.Status.OperationState) // serve's own notion of a change
			o.mu.Lock()
			h := o.changed[app.Name]
			if len(h) == 0 || h[len(h)-1].sig != sig {
				o.changed[app.Name] = append(h, change{at: at, sig: sig})
			}
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return o
}

// lastChangeBefore is when app's operation state last changed before t, as this watch saw it.
func (o *opWatch) lastChangeBefore(app string, t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last time.Time
	for _, c := range o.changed[app] {
		if c.at.Before(t) {
			last = c.at
		}
	}
	return last
}

// heldSince is when the old hook Job of a stuck app was deleted (its deletionTimestamp), zero if it is not.
func heldSince(t testing.TB, s stuckApp) time.Time {
	t.Helper()
	job, _ := s.app.JobState(t, "migrate")
	if job == nil || job.DeletionTimestamp == nil {
		return time.Time{}
	}
	return job.DeletionTimestamp.Time
}
