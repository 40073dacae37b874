package kube

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// ArtifactGCFinalizer is the finalizer Argo Workflows puts on a Workflow whose artifacts it must garbage-collect.
const ArtifactGCFinalizer = "workflows.argoproj.io/artifact-gc"

// ArtifactGCFinalizerStuck reports a Failed or Error Workflow being deleted longer than the threshold, held by the
// artifact-gc finalizer although it has no output artifacts to collect (argo-workflows #13499). It counts them in the
// node status wherever the controller keeps it (status.nodes, or status.compressedNodes decoded) and in
// status.outputs; when the controller offloaded it to its database (status.offloadNodeStatusVersion) or it cannot be
// decoded, the finding says so. Its remedy is only ever proposed, never applied unattended: forcing it where the
// artifacts cannot be counted would skip a real garbage collection; and on a workflow for which the controller
// created no garbage-collection Pod the controller ignores forceFinalizerRemoval, so that finding offers no action at
// all, only the removal of the finalizer by hand (noEffect).
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
		n, unknown := outputArtifacts(wf)
		if n > 0 {
			continue
		}
		ref := objectRef(wf)
		summary := fmt.Sprintf("Workflow %s/%s (%s) cannot be deleted: the artifact-gc finalizer waits for a garbage collection that has nothing to collect", wf.GetNamespace(), wf.GetName(), phase)
		count := "0"
		if unknown != "" {
			summary = fmt.Sprintf("Workflow %s/%s (%s) has been held by the artifact-gc finalizer since its deletion, and syncmedic cannot tell whether it has artifacts to collect: %s", wf.GetNamespace(), wf.GetName(), phase, unknown)
			count = "unknown: " + unknown
		}
		f := syncmedic.NewFinding(syncmedic.RuleArtifactGCFinalizerStuck, ref, summary)
		f.Since = dt.Time
		t := dt.Time
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		f.Evidence = []syncmedic.Evidence{
			{Field: "status.phase", Value: phase},
			{Field: "metadata.deletionTimestamp", Value: t.UTC().Format(time.RFC3339), Since: &t},
			{Field: "metadata.finalizers", Value: "[" + strings.Join(wf.GetFinalizers(), ", ") + "]"},
			{Field: "output artifacts", Value: count},
		}
		if msg != "" {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.message", Value: msg})
		}
		if strat, _, _ := unstructured.NestedString(wf.Object, "spec", "artifactGC", "strategy"); strat != "" {
			f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "spec.artifactGC.strategy", Value: strat})
		}
		f.Remedy = forceRemovalRemedy(wf, ref.App)
		if unknown != "" {
			f.Remedy.AutoSafe = false
			f.Remedy.Description = "Check first whether the workflow produced artifacts (`argo get " + wf.GetName() + " -n " + wf.GetNamespace() +
				"` reads the offloaded node status); if none, set spec.artifactGC.forceFinalizerRemoval: true so the workflow controller removes its own finalizer. With artifacts, forcing it leaks them: fix the garbage collection instead."
		}
		if unknown == "" && !gcPodsRecouped(wf) {
			noEffect(&f, wf, ref.App)
		}
		f.Advisories = []string{"Argo Workflows keeps this finalizer on failed workflows without artifacts before v3.5.11 and v3.6.0 (argo-workflows #13499, fixed by #13500); spec.artifactGC.forceFinalizerRemoval exists since v3.5.0 (#10810). A variant with forceFinalizerRemoval set is #16599."}
		out = append(out, f)
	}
	return out
}

// noEffect replaces f's forced removal with the removal of the finalizer by hand when the workflow controller would
// ignore the field: it honours
// spec.artifactGC.forceFinalizerRemoval only once every garbage-collection Pod it created has ended, and it counts a
// workflow for which it created none as not done (status.artifactGCStatus.podsRecouped empty;
// ArtGCStatus.AllArtifactGCPodsRecouped in v3.5.10 and v3.6.2). A failed workflow with nothing to collect gets no
// such Pod, so the patch changes nothing (proven on v3.5.10 by internal/conformance/workflows): the finding offers no
// action syncmedic could apply (ActionNone, no Params) and proposes removing the finalizer by hand instead.
func noEffect(f *syncmedic.Finding, wf *unstructured.Unstructured, app string) {
	f.Remedy.Action = syncmedic.ActionNone
	f.Remedy.Params = nil
	f.Remedy.Description = NoEffectReason + " " +
		"Upgrade Argo Workflows to v3.5.11+ or v3.6.0+, whose controller removes the finalizer itself, or remove the finalizer by hand (it guards no artifact); syncmedic applies nothing here."
	i := 0
	for j, fin := range wf.GetFinalizers() {
		if fin == ArtifactGCFinalizer {
			i = j
		}
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":"%s"},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, ArtifactGCFinalizer, i)
	f.Remedy.Commands = nil
	if app != "" {
		f.Remedy.Commands = append(f.Remedy.Commands, fmt.Sprintf("argocd app patch-resource %s --kind Workflow --group argoproj.io --resource-name %s --namespace %s --patch-type application/json-patch+json --patch '%s'",
			app, wf.GetName(), wf.GetNamespace(), patch))
	}
	f.Remedy.Commands = append(f.Remedy.Commands, fmt.Sprintf("kubectl -n %s patch workflow.argoproj.io %s --type json -p '%s'", wf.GetNamespace(), wf.GetName(), patch))
	f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.artifactGCStatus.podsRecouped", Value: "none: no garbage-collection Pod, so forceFinalizerRemoval is ignored"})
}

// NoEffectReason says why syncmedic neither offers nor applies spec.artifactGC.forceFinalizerRemoval on a workflow
// whose status.artifactGCStatus.podsRecouped is empty.
const NoEffectReason = "spec.artifactGC.forceFinalizerRemoval has no effect here: the workflow controller honours it only once the garbage-collection Pods it created have ended, " +
	"and it created none (status.artifactGCStatus.podsRecouped is empty: nothing to collect, argo-workflows #13499)."

// gcPodsRecouped reports whether the workflow controller has recorded at least one garbage-collection Pod of the
// workflow (status.artifactGCStatus.podsRecouped), the condition under which it acts on forceFinalizerRemoval.
func gcPodsRecouped(wf *unstructured.Unstructured) bool {
	pods, _, _ := unstructured.NestedMap(wf.Object, "status", "artifactGCStatus", "podsRecouped")
	return len(pods) > 0
}

// ForceFinalizerRemovalPatch is the merge patch that tells Argo Workflows to drop the artifact-gc finalizer.
const ForceFinalizerRemovalPatch = `{"spec":{"artifactGC":{"forceFinalizerRemoval":true}}}`

// forceRemovalRemedy proposes spec.artifactGC.forceFinalizerRemoval. It is never applied unattended: the
// controllers that keep the finalizer of a workflow with nothing to collect (before v3.5.11) act on the field only
// once a garbage-collection Pod they created has ended, and such a workflow has none (noEffect); where one exists,
// a workflow whose artifacts syncmedic counts as none is not the known bug, and a person should look first.
func forceRemovalRemedy(wf *unstructured.Unstructured, app string) syncmedic.Remedy {
	r := syncmedic.Remedy{
		Action:      syncmedic.ActionForceFinalizerRemoval,
		Description: "Set spec.artifactGC.forceFinalizerRemoval: true so the workflow controller removes its own finalizer once its garbage-collection Pods have ended; nothing is left to collect.",
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

// outputArtifacts counts the output artifacts the workflow's status records: the workflow's own status.outputs and
// every node's outputs, from status.nodes or, when the controller compressed them, status.compressedNodes (base64 of
// gzipped JSON, as Argo Workflows' file.CompressEncodeString writes it). unknown says why the nodes cannot be counted
// (offloaded to the controller's database, or not decodable); the count is then a lower bound.
func outputArtifacts(wf *unstructured.Unstructured) (n int, unknown string) {
	arts, _, _ := unstructured.NestedSlice(wf.Object, "status", "outputs", "artifacts")
	n = len(arts)
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	if compressed, _, _ := unstructured.NestedString(wf.Object, "status", "compressedNodes"); compressed != "" && len(nodes) == 0 {
		var err error
		if nodes, err = decompressNodes(compressed); err != nil {
			return n, "status.compressedNodes cannot be decoded (" + err.Error() + ")"
		}
	}
	for _, node := range nodes {
		m, _ := node.(map[string]interface{})
		arts, _, _ := unstructured.NestedSlice(m, "outputs", "artifacts")
		n += len(arts)
	}
	if v, _, _ := unstructured.NestedString(wf.Object, "status", "offloadNodeStatusVersion"); v != "" && len(nodes) == 0 {
		return n, "its node status is offloaded to the workflow controller's database (status.offloadNodeStatusVersion " + v + ")"
	}
	return n, ""
}

// maxNodesJSON bounds the decompressed node status read from status.compressedNodes (an object is at most 1.5 MiB,
// and node status compresses well).
const maxNodesJSON = 64 << 20

// decompressNodes decodes status.compressedNodes.
func decompressNodes(s string) (map[string]interface{}, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, maxNodesJSON+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxNodesJSON {
		return nil, errors.New("more than 64 MiB decompressed")
	}
	nodes := map[string]interface{}{}
	if err := json.Unmarshal(data, &nodes); err != nil {
		return nil, err
	}
	return nodes, nil
}
