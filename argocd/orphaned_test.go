package argocd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// hand-written state: orphanedApp builds in memory the state argo-cd #17155 describes (status.operationState Running,
// .operation cleared) for the pure rule tests; internal/conformance/argo reaches it on the real v2.14.21 and v3.6.1
// controllers with the person's patch those issues describe.

// orphanedApp is app shop whose sync, started ago, waits for the health of its Deployment and whose .operation was
// cleared.
func orphanedApp(started time.Duration) *v1alpha1.Application {
	a := healthWaitApp(started, health.HealthStatusProgressing, "")
	a.Status.OperationState.Operation.InitiatedBy = v1alpha1.OperationInitiator{Username: "alice"}
	a.Operation = nil
	return a
}

func TestClearingOperationIsAStateChange(t *testing.T) {
	a := orphanedApp(time.Hour)
	a.Operation = &a.Status.OperationState.Operation
	a.ResourceVersion = "1"
	l := newLoopHarness(t, "v2.14.21").l
	l.upsert(a.DeepCopy())
	first := l.apps[l.subject(a)].stateSince
	b := a.DeepCopy()
	b.Operation, b.ResourceVersion = nil, "2"
	l.upsert(b)
	require.True(t, l.apps[l.subject(a)].stateSince.After(first), "the watcher counts the orphaned state from when .operation was cleared")
}
