package kube

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// ArtifactGCFinalizer is the finalizer Argo Workflows puts on a Workflow whose artifacts it must garbage-collect.
const ArtifactGCFinalizer = "workflows.argoproj.io/artifact-gc"

// ArtifactGCFinalizerStuck reports a Failed or Error Workflow being deleted longer than the threshold, held by the
// artifact-gc finalizer although it has no output artifacts to collect (argo-workflows #13499).
func ArtifactGCFinalizerStuck(inv Inventory, now time.Time, th Thresholds) []syncmedic.Finding {
	var out []syncmedic.Finding
	for _, wf := range inv.Workflows {
		dt := wf.GetDeletionTimestamp()
		if dt == nil || now.Sub(dt.Time) < th.ArtifactGC || !hasFinalizer(wf, ArtifactGCFinalizer) {
			continue
		}
		phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
		if phase != "Failed" && phase != "Error" {
			continue
		}
		if n := outputArtifacts(wf); n > 0 {
			continue
		}
		ref := objectRef(wf)
		f := syncmedic.NewFinding(syncmedic.RuleArtifactGCFinalizerStuck, ref,
			fmt.Sprintf("Workflow %s/%s (%s) cannot be deleted: the artifact-gc finalizer waits for a garbage collection that has nothing to collect", wf.GetNamespace(), wf.GetName(), phase))
		f.Since = dt.Time
		t := dt.Time
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		f.Evidence = []syncmedic.Evidence{
			{Field: "status.phase", Value: phase},
			{Field: "metadata.deletionTimestamp", Value: t.UTC().Format(time.RFC3339), Since: &t},
			{Field: "metadata.finalizers", Value: "[" + strings.Join(wf.GetFinalizers(), ", ") + "]"},
			{Field: "output artifacts", Value: "0"},
		}
		if msg != "" {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.message", Value: msg})
		}
		if strat, _, _ := unstructured.NestedString(wf.Object, "spec", "artifactGC", "strategy"); strat != "" {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "spec.artifactGC.strategy", Value: strat})
		}
		f.Remedy = forceRemovalRemedy(wf, ref.App)
		f.Advisories = []string{"Argo Workflows keeps this finalizer on failed workflows without artifacts before v3.5.11 and v3.6.0 (argo-workflows #13499, fixed by #13500); spec.artifactGC.forceFinalizerRemoval exists since v3.5.0 (#10810). A variant with forceFinalizerRemoval set is #16599."}
		out = append(out, f)
	}
	return out
}

// ForceFinalizerRemovalPatch is the merge patch that tells Argo Workflows to drop the artifact-gc finalizer.
const ForceFinalizerRemovalPatch = `{"spec":{"artifactGC":{"forceFinalizerRemoval":true}}}`

func forceRemovalRemedy(wf *unstructured.Unstructured, app string) syncmedic.Remedy {
	r := syncmedic.Remedy{
		Action:      syncmedic.ActionForceFinalizerRemoval,
		AutoSafe:    true,
		Description: "Set spec.artifactGC.forceFinalizerRemoval: true so the workflow controller removes its own finalizer; nothing is left to collect.",
		Params: map[string]string{"group": "argoproj.io", "version": "v1alpha1", "kind": "Workflow",
			"namespace": wf.GetNamespace(), "name": wf.GetName(), "patch": ForceFinalizerRemovalPatch, "patchType": "application/merge-patch+json"},
	}
	if app != "" {
		r.Params["app"] = app
		r.Commands = append(r.Commands, fmt.Sprintf("argocd app patch-resource %s --kind Workflow --group argoproj.io --resource-name %s --namespace %s --patch-type application/merge-patch+json --patch '%s'",
			app, wf.GetName(), wf.GetNamespace(), ForceFinalizerRemovalPatch))
	}
	r.Commands = append(r.Commands, fmt.Sprintf("kubectl -n %s patch workflow.argoproj.io %s --type merge -p '%s'", wf.GetNamespace(), wf.GetName(), ForceFinalizerRemovalPatch))
	return r
}

func hasFinalizer(o *unstructured.Unstructured, name string) bool {
	for _, f := range o.GetFinalizers() {
		if f == name {
			return true
		}
	}
	return false
}

// outputArtifacts counts the output artifacts recorded in status.nodes[*].outputs.artifacts.
func outputArtifacts(wf *unstructured.Unstructured) int {
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	n := 0
	for _, node := range nodes {
		m, _ := node.(map[string]interface{})
		arts, _, _ := unstructured.NestedSlice(m, "outputs", "artifacts")
		n += len(arts)
	}
	return n
}
