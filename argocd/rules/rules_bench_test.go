package rules

import (
	"testing"
	"time"

	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// benchRule runs one rule over a matching observation ("fires") and over a healthy application whose last sync
// succeeded ("healthy", the common case in a fleet), failing if a verdict is not the expected one. No time is
// asserted.
func benchRule(b *testing.B, rule func(AppObservation, time.Time, Thresholds) []syncmedic.Finding, fires AppObservation) {
	th := DefaultThresholds()
	op := failedOp("successfully synced (all tasks run)")
	op.Phase = synccommon.OperationSucceeded
	healthy := AppObservation{App: app(op), ServerVersion: "v2.14.21"}
	for _, bc := range []struct {
		name  string
		obs   AppObservation
		fires bool
	}{{"fires", fires, true}, {"healthy", healthy, false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := len(rule(bc.obs, now, th)); (got > 0) != bc.fires {
					b.Fatalf("got %d findings, want some: %v", got, bc.fires)
				}
			}
		})
	}
}

const benchWaiting = "waiting for completion of hook batch/Job/migrate"

func BenchmarkHookFinalizerStuck(b *testing.B) {
	t := &testing.T{}
	benchRule(b, HookFinalizerStuck, AppObservation{App: app(runningOp(time.Hour, "waiting for deletion of batch/Job/migrate", "")), HooksKnown: true,
		Hooks: []*unstructured.Unstructured{hookJob(t, []string{"foregroundDeletion", HookFinalizer}, ago(10*time.Minute), true)}, ServerVersion: "v2.14.21"})
}

func BenchmarkHookCompletionMissed(b *testing.B) {
	t := &testing.T{}
	benchRule(b, HookCompletionMissed, AppObservation{App: app(runningOp(time.Hour, benchWaiting, synccommon.OperationRunning)), HooksKnown: true,
		Hooks: []*unstructured.Unstructured{hookJob(t, nil, nil, true)}, ServerVersion: "v2.14.21"})
}

func BenchmarkHookImmutable(b *testing.B) {
	t := &testing.T{}
	immutable := `one or more objects failed to apply, reason: Job.batch "migrate" is invalid: spec.template: Invalid value: core.PodTemplateSpec{}: field is immutable`
	benchRule(b, HookImmutable, AppObservation{App: app(failedOp(immutable)), HooksKnown: true, ServerVersion: "v2.14.3+71fd4e5",
		Hooks: []*unstructured.Unstructured{hookJob(t, []string{HookFinalizer}, nil, true)}})
}

func BenchmarkOperationStuck(b *testing.B) {
	benchRule(b, OperationStuck, AppObservation{App: app(runningOp(2*time.Hour, "waiting for healthy state of apps/Deployment/web", "")),
		HooksKnown: true, StateSince: now.Add(-45 * time.Minute), UIURL: "https://cd.example.com/"})
}
