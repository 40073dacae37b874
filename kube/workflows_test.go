package kube

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// compressNodes encodes node status as the workflow controller does when it compresses it (base64 of gzipped JSON,
// Argo Workflows util/file.CompressEncodeString).
func compressNodes(t *testing.T, nodesJSON string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(nodesJSON))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestArtifactGCCountsArtifactsWhereverTheStatusKeepsThem: the workflow controller compresses node status
// (status.compressedNodes) or offloads it to its database (status.offloadNodeStatusVersion) when it grows, leaving
// status.nodes empty, and keeps the workflow's own outputs in status.outputs. The forced removal skips the garbage
// collection, and the controller ignores it without a garbage-collection Pod: it is only ever proposed, and where
// the controller would ignore it the finding offers no action at all: the removal of the finalizer by hand is proposed
// instead.
func TestArtifactGCCountsArtifactsWhereverTheStatusKeepsThem(t *testing.T) {
	withStatus := func(t *testing.T, set func(status map[string]interface{})) Inventory {
		wf := obj(t, failedWorkflow)
		status, _, _ := unstructured.NestedMap(wf.Object, "status")
		delete(status, "nodes")
		set(status)
		require.NoError(t, unstructured.SetNestedMap(wf.Object, status, "status"))
		return Inventory{Workflows: []*unstructured.Unstructured{wf}}
	}
	artifact := `{"build-arm64-x7k2p":{"phase":"Failed","outputs":{"artifacts":[{"name":"binary","s3":{"key":"b/binary.tgz"}}]}}}`
	tests := []struct {
		name     string
		set      func(t *testing.T, status map[string]interface{})
		want     []syncmedic.RuleID
		evidence string // the "output artifacts" evidence of the artifact-gc finding
		ignored  bool   // the controller would ignore forceFinalizerRemoval: removal by hand proposed
		counted  bool   // the artifacts were counted (none), and forceFinalizerRemoval is proposed
	}{
		{name: "compressed node status without artifacts is decoded: nothing to collect, forceFinalizerRemoval proposed (a garbage-collection Pod is recorded)",
			set: func(t *testing.T, s map[string]interface{}) {
				s["compressedNodes"] = compressNodes(t, `{"build-arm64-x7k2p":{"phase":"Failed"}}`)
				s["artifactGCStatus"] = map[string]interface{}{"podsRecouped": map[string]interface{}{"build-arm64-x7k2p-artgc-wfdel-2166136261": true}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck}, evidence: "0", counted: true},
		{name: "no garbage-collection Pod recorded: the controller would ignore forceFinalizerRemoval, removal by hand proposed",
			set: func(t *testing.T, s map[string]interface{}) {
				s["nodes"] = map[string]interface{}{"build-arm64-x7k2p": map[string]interface{}{"phase": "Failed"}}
				s["artifactGCStatus"] = map[string]interface{}{"strategiesProcessed": map[string]interface{}{"OnWorkflowDeletion": true}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck}, evidence: "0", ignored: true},
		{name: "no artifactGCStatus at all: no garbage-collection Pod either, removal by hand proposed",
			set: func(t *testing.T, s map[string]interface{}) {
				s["nodes"] = map[string]interface{}{"build-arm64-x7k2p": map[string]interface{}{"phase": "Failed"}}
				delete(s, "artifactGCStatus")
			},
			want: []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck}, evidence: "0", ignored: true},
		{name: "compressed node status with an artifact is decoded: left to the garbage collection",
			set:  func(t *testing.T, s map[string]interface{}) { s["compressedNodes"] = compressNodes(t, artifact) },
			want: []syncmedic.RuleID{syncmedic.RuleStuckTerminating}},
		{name: "an artifact in the workflow's own status.outputs is left to the garbage collection",
			set: func(t *testing.T, s map[string]interface{}) {
				s["outputs"] = map[string]interface{}{"artifacts": []interface{}{map[string]interface{}{"name": "report"}}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleStuckTerminating}},
		{name: "offloaded node status cannot be counted: reported, the removal only proposed",
			set:      func(t *testing.T, s map[string]interface{}) { s["offloadNodeStatusVersion"] = "fnv:3486923718" },
			want:     []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck},
			evidence: "unknown: its node status is offloaded to the workflow controller's database (status.offloadNodeStatusVersion fnv:3486923718)"},
		{name: "compressed node status that does not decode cannot be counted: the removal only proposed",
			set:      func(t *testing.T, s map[string]interface{}) { s["compressedNodes"] = "not base64 gzip" },
			want:     []syncmedic.RuleID{syncmedic.RuleArtifactGCFinalizerStuck},
			evidence: "unknown: status.compressedNodes cannot be decoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := Evaluate(withStatus(t, func(s map[string]interface{}) { tt.set(t, s) }), now, DefaultThresholds())
			var got []syncmedic.RuleID
			for _, f := range fs {
				got = append(got, f.Rule)
				require.Equal(t, "build-arm64-x7k2p", f.Object.Name)
			}
			require.Equal(t, tt.want, got)
			if tt.want[0] != syncmedic.RuleArtifactGCFinalizerStuck {
				return
			}
			f := fs[0]
			require.False(t, f.Remedy.AutoSafe, "never applied unattended")
			if tt.ignored {
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "the controller ignores the patch: no action syncmedic could apply")
				require.Empty(t, f.Remedy.Params, "no patch to apply")
			} else {
				require.Equal(t, syncmedic.ActionForceFinalizerRemoval, f.Remedy.Action)
			}
			var count string
			for _, e := range f.Evidence {
				if e.Field == "output artifacts" {
					count = e.Value
				}
			}
			if tt.counted {
				require.Equal(t, tt.evidence, count)
				require.Contains(t, f.Remedy.Description, "Set spec.artifactGC.forceFinalizerRemoval")
				return
			}
			if tt.ignored {
				require.Equal(t, tt.evidence, count)
				require.Contains(t, f.Remedy.Description, "has no effect here")
				patch := `'[{"op":"test","path":"/metadata/finalizers/0","value":"workflows.argoproj.io/artifact-gc"},{"op":"remove","path":"/metadata/finalizers/0"}]'`
				require.Equal(t, []string{
					"argocd app patch-resource ci-pipelines --kind Workflow --group argoproj.io --resource-name build-arm64-x7k2p --namespace ci --patch-type application/json-patch+json --patch " + patch,
					"kubectl -n ci patch workflow.argoproj.io build-arm64-x7k2p --type json -p " + patch,
				}, f.Remedy.Commands)
				return
			}
			require.Contains(t, count, tt.evidence)
			require.Contains(t, f.Summary, "cannot tell whether it has artifacts to collect")
			require.Contains(t, f.Remedy.Description, "forcing it leaks them")
		})
	}
}
