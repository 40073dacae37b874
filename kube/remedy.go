package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/syncmedic/syncmedic"
)

// WorkflowRemedier applies workflows/force-finalizer-removal through the Kubernetes API: a merge patch setting
// spec.artifactGC.forceFinalizerRemoval: true, so the workflow controller drops its own artifact-gc finalizer. A
// Workflow an Argo CD application manages goes to ArgoCD instead (Argo CD's PatchResource), so Argo CD's view and
// RBAC stay in charge; without ArgoCD such a finding is refused. It re-reads the live Workflow first and refuses,
// with a permanent error and nothing written, one whose status.artifactGCStatus.podsRecouped is empty: the workflow
// controller ignores the field there (NoEffectReason), so a stale finding cannot apply it either.
type WorkflowRemedier struct {
	// Dynamic reads and patches Workflows.
	Dynamic dynamic.Interface
	// ArgoCD, when set, applies the remedy for Workflows an Argo CD application owns (the Remedy carries "app").
	ArgoCD syncmedic.Remedier
}

var _ syncmedic.Remedier = (*WorkflowRemedier)(nil)

// NewWorkflowRemedier returns a WorkflowRemedier using dyn.
func NewWorkflowRemedier(dyn dynamic.Interface) *WorkflowRemedier {
	return &WorkflowRemedier{Dynamic: dyn}
}

// Remediate implements syncmedic.Remedier.
func (r *WorkflowRemedier) Remediate(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionForceFinalizerRemoval, DryRun: dryRun}
	if f.Remedy.Action != syncmedic.ActionForceFinalizerRemoval {
		return out, syncmedic.Permanent(fmt.Errorf("action %q is not %s", f.Remedy.Action, syncmedic.ActionForceFinalizerRemoval))
	}
	if app := f.Remedy.Params["app"]; app != "" {
		if r.ArgoCD == nil {
			return out, syncmedic.Permanent(fmt.Errorf("Workflow is managed by Argo CD application %q: the patch must go through Argo CD's PatchResource, and no Argo CD connection is configured", app))
		}
		return r.ArgoCD.Remediate(ctx, f, dryRun)
	}
	key := types.NamespacedName{Namespace: f.Remedy.Params["namespace"], Name: f.Remedy.Params["name"]}
	if key.Namespace == "" || key.Name == "" {
		key = types.NamespacedName{Namespace: f.Object.Namespace, Name: f.Object.Name}
	}
	wfs := r.Dynamic.Resource(workflowsGVR).Namespace(key.Namespace)
	wf, err := wfs.Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		out.Steps = append(out.Steps, fmt.Sprintf("Workflow %s is gone; nothing to do", key))
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("reading Workflow %s: %w", key, err)
	}
	if !hasFinalizer(wf, ArtifactGCFinalizer) {
		out.Steps = append(out.Steps, fmt.Sprintf("Workflow %s no longer has the %s finalizer; nothing to do", key, ArtifactGCFinalizer))
		return out, nil
	}
	if !gcPodsRecouped(wf) {
		out.Steps = append(out.Steps, fmt.Sprintf("refused: nothing written to Workflow %s: %s Remove the finalizer by hand (the commands of the finding).", key, NoEffectReason))
		return out, syncmedic.Permanent(fmt.Errorf("refusing to patch Workflow %s: %s", key, NoEffectReason))
	}
	if set, _, _ := unstructured.NestedBool(wf.Object, "spec", "artifactGC", "forceFinalizerRemoval"); set {
		out.Steps = append(out.Steps, fmt.Sprintf("Workflow %s already has spec.artifactGC.forceFinalizerRemoval: true; waiting for the workflow controller", key))
		return out, nil
	}
	step := fmt.Sprintf("PATCH workflows.argoproj.io %s (merge patch): %s", key, ForceFinalizerRemovalPatch)
	if dryRun {
		out.Steps = append(out.Steps, "would "+step)
		return out, nil
	}
	if err := syncmedic.BeforeWrite(ctx, step); err != nil {
		return out, err
	}
	if _, err := wfs.Patch(ctx, key.Name, types.MergePatchType, []byte(ForceFinalizerRemovalPatch), metav1.PatchOptions{}); err != nil {
		switch {
		case apierrors.IsForbidden(err):
			err = syncmedic.Permanent(fmt.Errorf("patching Workflow %s: syncmedic's account needs `patch` on workflows.argoproj.io, which the install grants only on request: the component manifests/components/workflows-remedy, or the chart's workflowsRemedy.enabled=true: %w", key, err))
		case apierrors.IsInvalid(err):
			err = syncmedic.Permanent(fmt.Errorf("patching Workflow %s: %w", key, err))
		default:
			err = fmt.Errorf("patching Workflow %s: %w", key, err)
		}
		return out, err
	}
	out.Changed = true
	out.Steps = append(out.Steps, step, ControllerRemovesFinalizer)
	return out, nil
}

// ControllerRemovesFinalizer is the last step of an applied force-finalizer-removal: the patch only asks, and the
// Workflow stays until the workflow controller acts on it.
const ControllerRemovesFinalizer = "patch written: the workflow controller removes the " + ArtifactGCFinalizer +
	" finalizer itself on its next pass over the Workflow, once its garbage-collection Pods have ended; the Workflow stays until it does"

// DelegateTo makes r the remedier for Workflows an Argo CD application owns (serve wires Argo CD's here).
func (w *WorkflowRemedier) DelegateTo(r syncmedic.Remedier) { w.ArgoCD = r }
