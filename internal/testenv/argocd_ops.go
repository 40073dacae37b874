package testenv

import (
	"context"
	"sync"
	"testing"

	upstream "github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	appclientset "github.com/argoproj/argo-cd/v2/pkg/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// OperationCounter counts, from the apiserver's own watch of an Application, how many times its operation was
// turned Terminating and how many new syncs were requested (Sync sets .operation and clears the operation state):
// what an "exactly once" remedy test checks.
type OperationCounter struct {
	mu                  sync.Mutex
	terminations, syncs int
}

// CountOperations starts counting the operations of Application name from now until the test ends.
func (a *ArgoCDServer) CountOperations(t testing.TB, name string) *OperationCounter {
	t.Helper()
	apps, err := appclientset.NewForConfig(a.Env.Config)
	if err != nil {
		t.Fatalf("testenv: Application client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cur, err := apps.ArgoprojV1alpha1().Applications(a.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("testenv: reading Application %s: %v", name, err)
	}
	w, err := apps.ArgoprojV1alpha1().Applications(a.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: cur.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatalf("testenv: watching Application %s: %v", name, err)
	}
	c := &OperationCounter{}
	go func() {
		defer w.Stop()
		prev := ConvertArgo[v1alpha1.Application](cur)
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(*upstream.Application)
			if !ok {
				continue
			}
			app := ConvertArgo[v1alpha1.Application](obj)
			c.mu.Lock()
			if OperationPhase(app) == synccommon.OperationTerminating && OperationPhase(prev) != synccommon.OperationTerminating {
				c.terminations++
			}
			if app.Operation != nil && app.Status.OperationState == nil && prev.Status.OperationState != nil {
				c.syncs++
			}
			c.mu.Unlock()
			prev = app
		}
	}()
	return c
}

// Counts returns the terminations and the new syncs seen so far.
func (c *OperationCounter) Counts() (terminations, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.terminations, c.syncs
}

// OperationPhase is the phase of app's operation state, "" when it has none.
func OperationPhase(app *v1alpha1.Application) synccommon.OperationPhase {
	if app.Status.OperationState == nil {
		return ""
	}
	return app.Status.OperationState.Phase
}
