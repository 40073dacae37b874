// Package argofixture holds the in-memory Argo CD applications and operations the unit tests of argocd,
// argocd/rules and argocd/remedy are written against: one copy, so the three packages' tests judge the same objects.
// It writes nothing to an apiserver and imports only the generated Argo CD API types.
package argofixture

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// Now is the instant the fixtures are judged at.
var Now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// Ago is the time d before Now.
func Ago(d time.Duration) *metav1.Time { t := metav1.NewTime(Now.Add(-d)); return &t }

// App is the Application argocd/shop of project default, deploying to namespace shop, with op as its operation state
// (and, while op runs, as its .operation).
func App(op *v1alpha1.OperationState) *v1alpha1.Application {
	a := &v1alpha1.Application{}
	a.Name, a.Namespace = "shop", "argocd"
	a.Spec.Project = "default"
	a.Spec.Destination.Namespace = "shop"
	a.Status.OperationState = op
	if op != nil && !op.Phase.Completed() {
		a.Operation = &op.Operation // a running operation is the one .operation holds
	}
	return a
}

// RunningOp is a sync of revision 4f2c1e9 Running since started ago with message msg and, when hookPhase is set, the
// PreSync hook Job shop/migrate in that phase.
//
// hand-written state: RunningOp builds operation states in memory for the pure rule tests (nothing is written to an
// apiserver); the real controllers produce them in internal/conformance/argo (a running hook wave in
// TestSlowAndFastHookWaveIsNotStuckOnV3, the failed "field is immutable" sync and the person's delete of the old hook
// in TestImmutableHookTemplateChange, on v2.14.21 and v3.6.1).
func RunningOp(started time.Duration, msg string, hookPhase synccommon.OperationPhase) *v1alpha1.OperationState {
	op := &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: "4f2c1e9", SyncOptions: []string{"CreateNamespace=true"}}},
		Phase:     synccommon.OperationRunning, Message: msg, StartedAt: *Ago(started),
	}
	if hookPhase != "" {
		op.SyncResult = &v1alpha1.SyncOperationResult{Revision: "4f2c1e9", Resources: v1alpha1.ResourceResults{{
			Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate",
			HookType: synccommon.HookTypePreSync, HookPhase: hookPhase,
		}}}
	}
	return op
}

// Reconciled sets a's status.reconciledAt — when the application-controller last compared it — to d before Now, and
// returns a.
func Reconciled(a *v1alpha1.Application, d time.Duration) *v1alpha1.Application {
	a.Status.ReconciledAt = Ago(d)
	return a
}
