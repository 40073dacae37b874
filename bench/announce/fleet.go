package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	health "github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// fleetLabel marks the healthy Applications (the stuck ones carry testenv.RealAppLabel instead).
const fleetLabel = "bench.syncmedic.io/fleet"

// healthyManifest is the whole of a healthy application: one small ConfigMap, so no sync waits on a kubelet.
const healthyManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: healthy\n"

// createFleet creates n Applications with automated sync, sharing one git repository and path, each with its own
// destination namespace, from workers goroutines.
func createFleet(t testing.TB, stack *testenv.RealArgoCD, n, workers int) {
	t.Helper()
	repo := testenv.NewGitRepo(t)
	repo.Write(t, "healthy/configmap.yaml", healthyManifest)
	repo.Commit(t, "healthy fleet")
	ctx := context.Background()
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := createHealthy(ctx, stack, repo.URL, i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating the healthy applications: %v", firstErr)
	}
}

func createHealthy(ctx context.Context, stack *testenv.RealArgoCD, repoURL string, i int) error {
	name := fmt.Sprintf("healthy-%05d", i)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := stack.Env.Client.Create(ctx, ns); err != nil {
		return err
	}
	app := &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stack.Namespace, Labels: map[string]string{fleetLabel: "healthy"}},
		Spec: v1alpha1.ApplicationSpec{
			Project:     v1alpha1.DefaultAppProjectName,
			Source:      &v1alpha1.ApplicationSource{RepoURL: repoURL, Path: "healthy", TargetRevision: "main"},
			Destination: v1alpha1.ApplicationDestination{Server: v1alpha1.KubernetesInternalAPIServerAddr, Namespace: name},
			SyncPolicy:  &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{}},
		},
	}
	return stack.Env.Client.Create(ctx, app)
}

// fleetState counts the healthy applications that are synced, healthy, and whose last operation succeeded.
func fleetState(ctx context.Context, stack *testenv.RealArgoCD) (ready, total int, err error) {
	list := &v1alpha1.ApplicationList{}
	if err := stack.Env.Client.List(ctx, list, client.InNamespace(stack.Namespace), client.HasLabels{fleetLabel}); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		if settled(&list.Items[i]) {
			ready++
		}
	}
	return ready, len(list.Items), nil
}

func settled(app *v1alpha1.Application) bool {
	op := app.Status.OperationState
	return app.Status.Sync.Status == v1alpha1.SyncStatusCodeSynced && app.Status.Health.Status == health.HealthStatusHealthy &&
		app.Operation == nil && op != nil && op.Phase == synccommon.OperationSucceeded
}

// waitFleet waits until all n healthy applications have settled, printing progress every 30 s.
func waitFleet(t testing.TB, stack *testenv.RealArgoCD, n int, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	start, lastPrint := time.Now(), time.Now()
	for {
		ready, total, err := fleetState(ctx, stack)
		if err == nil && total == n && ready == n {
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("only %d of %d healthy applications synced after %s (last error: %v)", ready, n, timeout, err)
		}
		if time.Since(lastPrint) > 30*time.Second {
			progress("  %d of %d healthy applications synced after %s", ready, n, time.Since(start).Round(time.Second))
			lastPrint = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
}
