package remedy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
)

// TestForceFinalizerRemovalReadsTheLiveWorkflowFirst: the workflow controller ignores
// spec.artifactGC.forceFinalizerRemoval on a Workflow for which it created no garbage-collection Pod
// (status.artifactGCStatus.podsRecouped empty, argo-workflows #13499), so the remedy refuses it — in a dry run too,
// and whatever a stale finding says — and writes nothing; where the controller acts on it, the outcome says the
// patch was written and that the controller removes the finalizer.
func TestForceFinalizerRemovalReadsTheLiveWorkflowFirst(t *testing.T) {
	workflow := func(status string) string {
		return `{"apiVersion":"argoproj.io/v1alpha1","kind":"Workflow","metadata":{"name":"build","namespace":"ci","finalizers":["workflows.argoproj.io/artifact-gc"]},` +
			`"spec":{"artifactGC":{"strategy":"OnWorkflowDeletion"}},"status":` + status + `}`
	}
	noPod := workflow(`{"phase":"Failed","artifactGCStatus":{"strategiesProcessed":{"OnWorkflowDeletion":true}}}`)
	onePod := workflow(`{"phase":"Failed","artifactGCStatus":{"podsRecouped":{"build-artgc-wfdel-2166136261":true}}}`)
	f := syncmedic.Finding{Fingerprint: "fp", Remedy: syncmedic.Remedy{Action: syncmedic.ActionForceFinalizerRemoval, Params: map[string]string{
		rules.ParamApp: "ci-pipelines", rules.ParamGroup: "argoproj.io", rules.ParamVersion: "v1alpha1", rules.ParamKind: "Workflow", rules.ParamNamespace: "ci", rules.ParamName: "build",
		rules.ParamPatch: `{"spec":{"artifactGC":{"forceFinalizerRemoval":true}}}`, rules.ParamPatchType: "application/merge-patch+json"}}}
	tests := []struct {
		name    string
		live    string
		dryRun  bool
		refused bool
		changed bool
	}{
		{name: "no garbage-collection Pod: refused, nothing written", live: noPod, refused: true},
		{name: "no garbage-collection Pod, dry run: refused too", live: noPod, dryRun: true, refused: true},
		{name: "a garbage-collection Pod recorded, dry run: planned, nothing written", live: onePod, dryRun: true},
		{name: "a garbage-collection Pod recorded: patched, and the controller removes the finalizer", live: onePod, changed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeRemedyArgo{live: tt.live}
			out, err := newTestRemedies(t, fake).ForceFinalizerRemoval(context.Background(), f, tt.dryRun)
			require.Equal(t, tt.changed, out.Changed)
			if tt.refused {
				require.Error(t, err)
				require.True(t, syncmedic.IsPermanent(err), "retrying cannot help")
				require.Contains(t, err.Error(), "podsRecouped is empty")
				require.Len(t, out.Steps, 1)
				require.Contains(t, out.Steps[0], "refused: nothing written")
				require.Empty(t, fake.patches)
				return
			}
			require.NoError(t, err)
			if tt.dryRun {
				require.Empty(t, fake.patches)
				require.Len(t, out.Steps, 1)
				require.Contains(t, out.Steps[0], "PatchResource app=ci-pipelines")
				return
			}
			require.Equal(t, []string{`{"spec":{"artifactGC":{"forceFinalizerRemoval":true}}}`}, fake.patches)
			require.Len(t, out.Steps, 2)
			require.Contains(t, out.Steps[1], "patch written: the workflow controller removes the artifact-gc finalizer itself")
		})
	}
}
