package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// Remedy parameter keys (Remedy.Params) shared by the rules and the remedies.
const (
	ParamApp          = "app"
	ParamAppNamespace = "appNamespace"
	ParamProject      = "project"
	ParamGroup        = "group"
	ParamVersion      = "version"
	ParamKind         = "kind"
	ParamNamespace    = "namespace"
	ParamName         = "name"
	ParamPatch        = "patch"
	ParamPatchType    = "patchType"
	ParamFinalizer    = "finalizer"
	// ParamUID is the UID of the object the finding is about: a remedy finding another UID under the same name acts
	// on nothing (the object was re-created).
	ParamUID = "uid"
	// ParamThenSync is "true" when the operation must be terminated (if running) and synced again after the patch.
	ParamThenSync = "thenSync"
	// ParamOperationPhase is, with thenSync, the phase of the operation the finding was made for: a sync that already
	// ended (hook-immutable's Failed sync) is the state the remedy was planned for, not one that ended by itself.
	ParamOperationPhase = "operationPhase"
	ParamRevision       = "revision"
	ParamRevisions      = "revisions"
	ParamSyncOptions    = "syncOptions"
	ParamPrune          = "prune"
	// ParamOperationStartedAt is the startedAt (RFC3339) of the operation the finding is about: a remedy that finds a
	// later operation knows the fix already happened.
	ParamOperationStartedAt = "operationStartedAt"
	// ParamEvidenceAt is when (RFC3339) the evidence of a terminating finding dates from: the hook's finish, the time
	// a hook not found is judged from, an operation's last change. The remedy terminates only when the
	// application-controller has reconciled the app after it (status.reconciledAt).
	ParamEvidenceAt = "evidenceAt"
)

// JSONPatchType is the patch type PatchResource takes for a JSON patch.
const JSONPatchType = "application/json-patch+json"

func hookEvidence(h *unstructured.Unstructured) []syncmedic.Evidence {
	ev := []syncmedic.Evidence{
		{Field: "hook", Value: hookType(h)},
		{Field: "metadata.finalizers", Value: "[" + strings.Join(h.GetFinalizers(), ", ") + "]"},
	}
	if dt := h.GetDeletionTimestamp(); dt != nil {
		t := dt.Time
		ev = append(ev, syncmedic.Evidence{Field: "metadata.deletionTimestamp", Value: t.UTC().Format(time.RFC3339), Since: &t})
	}
	if p, ok := h.GetAnnotations()["argocd.argoproj.io/hook-delete-policy"]; ok {
		ev = append(ev, syncmedic.Evidence{Field: "hook-delete-policy", Value: p})
	}
	if done, why := hookFinished(h); done {
		ev = append(ev, syncmedic.Evidence{Field: "status", Value: why})
	}
	return ev
}

func operationEvidence(op *v1alpha1.OperationState) []syncmedic.Evidence {
	if op == nil {
		return []syncmedic.Evidence{{Field: "status.operationState", Value: "none (no operation running)"}}
	}
	started := op.StartedAt.Time
	ev := []syncmedic.Evidence{
		{Field: "operationState.phase", Value: string(op.Phase)},
		{Field: "operationState.startedAt", Value: started.UTC().Format(time.RFC3339), Since: &started},
	}
	if op.Message != "" {
		ev = append(ev, syncmedic.Evidence{Field: "operationState.message", Value: op.Message})
	}
	if op.FinishedAt != nil {
		t := op.FinishedAt.Time
		ev = append(ev, syncmedic.Evidence{Field: "operationState.finishedAt", Value: t.UTC().Format(time.RFC3339), Since: &t})
	}
	if rev := syncRevision(op); rev != "" {
		ev = append(ev, syncmedic.Evidence{Field: "revision", Value: rev})
	}
	return ev
}

// syncRevision returns the revision the operation syncs: the requested one, else the one it resolved.
func syncRevision(op *v1alpha1.OperationState) string {
	if op == nil {
		return ""
	}
	if s := op.Operation.Sync; s != nil {
		if s.Revision != "" {
			return s.Revision
		}
		if len(s.Revisions) > 0 {
			return strings.Join(s.Revisions, ",")
		}
	}
	if op.SyncResult != nil {
		if op.SyncResult.Revision != "" {
			return op.SyncResult.Revision
		}
		return strings.Join(op.SyncResult.Revisions, ",")
	}
	return ""
}

// syncParams records what a new Sync needs to repeat the operation: revision(s), options, prune.
func syncParams(obs AppObservation, p map[string]string) {
	op := obs.App.Status.OperationState
	p[ParamApp], p[ParamAppNamespace], p[ParamProject] = obs.App.Name, obs.App.Namespace, obs.App.Spec.Project
	if op == nil {
		return
	}
	p[ParamOperationStartedAt] = op.StartedAt.UTC().Format(time.RFC3339)
	if s := op.Operation.Sync; s != nil {
		if s.Revision != "" {
			p[ParamRevision] = s.Revision
		}
		if len(s.Revisions) > 0 {
			p[ParamRevisions] = strings.Join(s.Revisions, ",")
		}
		if len(s.SyncOptions) > 0 {
			p[ParamSyncOptions] = strings.Join(s.SyncOptions, ",")
		}
		if s.Prune {
			p[ParamPrune] = "true"
		}
	}
	if p[ParamRevision] == "" && p[ParamRevisions] == "" && op.SyncResult != nil {
		if op.SyncResult.Revision != "" {
			p[ParamRevision] = op.SyncResult.Revision
		} else if len(op.SyncResult.Revisions) > 0 {
			p[ParamRevisions] = strings.Join(op.SyncResult.Revisions, ",")
		}
	}
}

func syncCommand(obs AppObservation, p map[string]string) string {
	cmd := "argocd app sync " + cliAppName(obs)
	if r := p[ParamRevision]; r != "" {
		cmd += " --revision " + r
	}
	if rs := p[ParamRevisions]; rs != "" {
		for i, r := range strings.Split(rs, ",") {
			cmd += fmt.Sprintf(" --revisions %s --source-positions %d", r, i+1)
		}
	}
	if p[ParamPrune] == "true" {
		cmd += " --prune"
	}
	if o := p[ParamSyncOptions]; o != "" {
		for _, opt := range strings.Split(o, ",") {
			cmd += " --sync-option " + opt
		}
	}
	return cmd
}

func resyncRemedy(obs AppObservation, description string) syncmedic.Remedy {
	p := map[string]string{}
	syncParams(obs, p)
	cmds := []string{}
	if op := obs.App.Status.OperationState; op != nil && !op.Phase.Completed() {
		cmds = append(cmds, "argocd app terminate-op "+cliAppName(obs))
	}
	cmds = append(cmds, syncCommand(obs, p))
	return syncmedic.Remedy{Action: syncmedic.ActionTerminateAndResync, AutoSafe: true, RerunsHooks: true, Description: description,
		Commands: cmds, Params: p}
}

func removeFinalizerRemedy(obs AppObservation, h *unstructured.Unstructured, idx int, thenSync bool) syncmedic.Remedy {
	gvk := h.GroupVersionKind()
	patch := RemoveFinalizerPatch(idx, HookFinalizer, string(h.GetUID()))
	p := map[string]string{
		ParamGroup: gvk.Group, ParamVersion: gvk.Version, ParamKind: gvk.Kind, ParamNamespace: h.GetNamespace(), ParamName: h.GetName(),
		ParamPatch: patch, ParamPatchType: JSONPatchType, ParamFinalizer: HookFinalizer, ParamThenSync: strconv.FormatBool(thenSync),
		ParamUID: string(h.GetUID()),
	}
	syncParams(obs, p)
	if op := obs.App.Status.OperationState; thenSync && op != nil {
		p[ParamOperationPhase] = string(op.Phase)
	}
	patchCmd := fmt.Sprintf("argocd app patch-resource %s --kind %s --resource-name %s --namespace %s", cliAppName(obs), gvk.Kind, h.GetName(), h.GetNamespace())
	if gvk.Group != "" {
		patchCmd += " --group " + gvk.Group
	}
	patchCmd += fmt.Sprintf(" --patch-type %s --patch '%s'", JSONPatchType, patch)
	cmds := []string{
		patchCmd,
		fmt.Sprintf("# or, without the Argo CD API: kubectl -n %s patch %s %s --type json -p '%s'", h.GetNamespace(), kindLower(gvk.Kind), h.GetName(), patch),
	}
	desc := "Remove exactly the finalizer argocd.argoproj.io/hook-finalizer (the patch tests the object's UID and the entry first, so no other finalizer and no re-created hook is touched) so the deleted hook can go away."
	if thenSync {
		cmds = append(cmds, "argocd app terminate-op "+cliAppName(obs)+"   # only if the operation is still running", syncCommand(obs, p))
		desc += " Then sync the same revision again: the new sync runs every hook of the application again (migrations included)."
	}
	return syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true, RerunsHooks: thenSync, Description: desc,
		Commands: cmds, Params: p}
}
