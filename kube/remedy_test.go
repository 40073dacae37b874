package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/syncmedic/syncmedic"
)

// TestWorkflowRemedierReadsTheLiveWorkflowFirst: the workflow controller ignores spec.artifactGC.forceFinalizerRemoval
// on a Workflow for which it created no garbage-collection Pod (status.artifactGCStatus.podsRecouped empty,
// argo-workflows #13499; proven on v3.5.10 by internal/conformance/workflows). A finding made while a Pod was
// recorded, or stale, must not apply it then: the remedier re-reads the Workflow and refuses, permanently, writing
// nothing, in a dry run too. Where the controller acts on it, the outcome says the patch was written and that the
// controller removes the finalizer, not that the Workflow is gone.
func TestWorkflowRemedierReadsTheLiveWorkflowFirst(t *testing.T) {
	workflow := func(t *testing.T, recouped bool) *unstructured.Unstructured {
		wf := obj(t, failedWorkflow)
		wf.SetLabels(nil) // not an Argo CD application's: patched through the Kubernetes API
		if recouped {
			pods := map[string]interface{}{"build-arm64-x7k2p-artgc-wfdel-2166136261": true}
			// hand-written state: a unit fixture read by a fake client; no workflow controller runs here.
			require.NoError(t, unstructured.SetNestedMap(wf.Object, pods, "status", "artifactGCStatus", "podsRecouped"))
		}
		return wf
	}
	// The finding as it was made while a garbage-collection Pod was recorded: the action is offered.
	f := ArtifactGCFinalizerStuck(Inventory{Workflows: []*unstructured.Unstructured{workflow(t, true)}}, now, DefaultThresholds())[0]
	require.Equal(t, syncmedic.ActionForceFinalizerRemoval, f.Remedy.Action)
	tests := []struct {
		name     string
		recouped bool
		dryRun   bool
		refused  bool
		gated    bool // the policy refuses the write right before it is sent (the remediation stage's gate)
		patched  bool
	}{
		{name: "no garbage-collection Pod on the live Workflow: refused, nothing written", refused: true},
		{name: "no garbage-collection Pod, dry run: refused too", dryRun: true, refused: true},
		{name: "a garbage-collection Pod recorded, dry run: planned, nothing written", recouped: true, dryRun: true},
		{name: "a garbage-collection Pod recorded: patched; the controller removes the finalizer", recouped: true, patched: true},
		{name: "a garbage-collection Pod recorded, the kill switch turned on before the write: nothing written", recouped: true, gated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{workflowsGVR: "WorkflowList"}, workflow(t, tt.recouped))
			ctx := context.Background()
			if tt.gated {
				ctx = syncmedic.WithWriteGate(ctx, func(context.Context, string) string {
					return "the kill switch is on: syncmedic takes no action (dry-run)"
				})
			}
			out, err := NewWorkflowRemedier(dyn).Remediate(ctx, f, tt.dryRun)
			var patches []k8stesting.Action
			for _, a := range dyn.Actions() {
				if a.GetVerb() == "patch" {
					patches = append(patches, a)
				}
			}
			require.Equal(t, tt.patched, out.Changed)
			if tt.refused {
				require.Error(t, err)
				require.True(t, syncmedic.IsPermanent(err), "retrying cannot help")
				require.Contains(t, err.Error(), "podsRecouped is empty")
				require.Len(t, out.Steps, 1)
				require.Contains(t, out.Steps[0], "refused: nothing written to Workflow ci/build-arm64-x7k2p")
				require.Empty(t, patches)
				return
			}
			if tt.gated {
				require.EqualError(t, err, "not sent: PATCH workflows.argoproj.io ci/build-arm64-x7k2p (merge patch): "+ForceFinalizerRemovalPatch+
					", refused right before it was sent: the kill switch is on: syncmedic takes no action (dry-run)")
				require.Empty(t, patches)
				return
			}
			require.NoError(t, err)
			if tt.dryRun {
				require.Empty(t, patches)
				require.Equal(t, []string{"would PATCH workflows.argoproj.io ci/build-arm64-x7k2p (merge patch): " + ForceFinalizerRemovalPatch}, out.Steps)
				return
			}
			require.Len(t, patches, 1)
			require.Equal(t, []string{"PATCH workflows.argoproj.io ci/build-arm64-x7k2p (merge patch): " + ForceFinalizerRemovalPatch, ControllerRemovesFinalizer}, out.Steps)
		})
	}
}
