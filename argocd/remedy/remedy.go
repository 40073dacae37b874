package remedy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
)

// RemedierOptions configure the remedies applied through the Argo CD API. Client is required.
type RemedierOptions struct {
	Client argocd.Client
	Log    *slog.Logger
	// RetryBackoff is the first wait before retrying Sync on "another operation is already in progress"; it doubles
	// up to 10s, for at most SyncAttempts attempts (defaults 250ms and 10).
	RetryBackoff time.Duration
	SyncAttempts int
	// StopTimeout bounds the wait, on the watch, for a terminated operation to stop (default 5m).
	StopTimeout time.Duration
	// Access answers CanI, asked before terminating an operation whose new sync would name a revision that Argo CD
	// v3.2+ may refuse without `applications, override` (default: Client, when it implements AccountClient).
	Access argocd.AccountClient
	// Settings answers whether argocd-server accepts a Sync carrying Replace=true, asked before terminating an
	// operation whose new sync carries it on Argo CD v3 (default: Client, when it implements SyncSettingsClient).
	Settings argocd.SyncSettingsClient
}

// Remedies applies the argocd/* actions. Every method is idempotent, and in dry-run changes nothing and returns the
// steps it would take (terminate-and-resync and force-finalizer-removal read the live object for it).
type Remedies struct {
	o RemedierOptions
	// terminated holds, by application, the startedAt of the operation these remedies terminated and have not yet
	// synced again (see terminatedHere).
	mu         sync.Mutex
	terminated map[string]string
}

// NewRemedies validates o and returns the remedies.
func NewRemedies(o RemedierOptions) (*Remedies, error) {
	if o.Client == nil {
		return nil, errors.New("argocd remedies: no client")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 250 * time.Millisecond
	}
	if o.SyncAttempts <= 0 {
		o.SyncAttempts = 10
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 5 * time.Minute
	}
	o.Access = argocd.AccessOf(o.Access, o.Client)
	if s, ok := o.Client.(argocd.SyncSettingsClient); ok && o.Settings == nil {
		o.Settings = s
	}
	return &Remedies{o: o, terminated: map[string]string{}}, nil
}

// Remediers returns the actions by ID: remove-hook-finalizer, terminate-and-resync, terminate-operation,
// resync-orphaned, hard-refresh, and workflows/force-finalizer-removal for Workflows that an Argo CD application manages.
func (r *Remedies) Remediers() syncmedic.Remediers {
	return syncmedic.Remediers{
		syncmedic.ActionRemoveHookFinalizer:   syncmedic.RemedierFunc(r.RemoveHookFinalizer),
		syncmedic.ActionTerminateAndResync:    resyncRemedier{r},
		syncmedic.ActionTerminateOperation:    syncmedic.RemedierFunc(r.TerminateOperation),
		syncmedic.ActionResyncOrphaned:        syncmedic.RemedierFunc(r.ResyncOrphaned),
		syncmedic.ActionHardRefresh:           syncmedic.RemedierFunc(r.HardRefresh),
		syncmedic.ActionForceFinalizerRemoval: syncmedic.RemedierFunc(r.ForceFinalizerRemoval),
	}
}

// targetOf returns the application a finding's remedy acts on.
func targetOf(f syncmedic.Finding) (argocd.AppRef, error) {
	p := f.Remedy.Params
	t := argocd.AppRef{Name: p[rules.ParamApp], Namespace: p[rules.ParamAppNamespace], Project: p[rules.ParamProject]}
	if t.Name == "" {
		t.Name, t.Namespace, t.Project = f.Object.App, f.Object.AppNamespace, f.Object.Project
	}
	if t.Name == "" {
		return t, syncmedic.Permanent(fmt.Errorf("finding %s names no Argo CD application: nothing to act through", f.Fingerprint))
	}
	return t, nil
}

// resourceOf is the object a patch remedy acts on, from the remedy parameters.
type resourceOf struct{ group, version, kind, namespace, name string }

func (o resourceOf) String() string {
	gk := o.kind
	if o.group != "" {
		gk = o.kind + "." + o.group
	}
	return gk + " " + o.namespace + "/" + o.name
}

func resourceParams(f syncmedic.Finding) (resourceOf, error) {
	p := f.Remedy.Params
	o := resourceOf{group: p[rules.ParamGroup], version: p[rules.ParamVersion], kind: p[rules.ParamKind], namespace: p[rules.ParamNamespace], name: p[rules.ParamName]}
	if o.kind == "" || o.name == "" || o.version == "" {
		return o, syncmedic.Permanent(fmt.Errorf("finding %s: remedy parameters lack the resource (kind, version, name)", f.Fingerprint))
	}
	return o, nil
}

func (r *Remedies) patchRequest(t argocd.AppRef, o resourceOf, patch, patchType string) *application.ApplicationResourcePatchRequest {
	req := &application.ApplicationResourcePatchRequest{
		Name: strPtr(t.Name), Namespace: strPtr(o.namespace), ResourceName: strPtr(o.name), Version: strPtr(o.version),
		Group: strPtr(o.group), Kind: strPtr(o.kind), Patch: strPtr(patch), PatchType: strPtr(patchType),
	}
	if t.Namespace != "" {
		req.AppNamespace = strPtr(t.Namespace)
	}
	if t.Project != "" {
		req.Project = strPtr(t.Project)
	}
	return req
}

func (r *Remedies) getResource(ctx context.Context, t argocd.AppRef, o resourceOf) (*unstructured.Unstructured, error) {
	req := &application.ApplicationResourceRequest{
		Name: strPtr(t.Name), Namespace: strPtr(o.namespace), ResourceName: strPtr(o.name), Version: strPtr(o.version),
		Group: strPtr(o.group), Kind: strPtr(o.kind),
	}
	if t.Namespace != "" {
		req.AppNamespace = strPtr(t.Namespace)
	}
	if t.Project != "" {
		req.Project = strPtr(t.Project)
	}
	res, err := r.o.Client.GetResource(ctx, req)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(res.GetManifest())); err != nil {
		return nil, fmt.Errorf("argocd GetResource %s %s: unreadable manifest: %w", t, o, err)
	}
	return u, nil
}

// patchOf reads what a PatchResource remedy needs from the finding: the application, the resource, and the patch
// with its type (defaultType when the finding names none; "" makes a missing type an error).
func patchOf(f syncmedic.Finding, defaultType string) (t argocd.AppRef, o resourceOf, patch, patchType string, err error) {
	if t, err = targetOf(f); err != nil {
		return
	}
	if o, err = resourceParams(f); err != nil {
		return
	}
	patch, patchType = f.Remedy.Params[rules.ParamPatch], f.Remedy.Params[rules.ParamPatchType]
	if patchType == "" {
		patchType = defaultType
	}
	if patch == "" || patchType == "" {
		err = syncmedic.Permanent(fmt.Errorf("finding %s: remedy has no patch", f.Fingerprint))
	}
	return
}

// RemoveHookFinalizer removes exactly argocd.argoproj.io/hook-finalizer from the hook object with PatchResource and
// a JSON patch that tests the entry before removing it; if the list moved meanwhile it re-reads the object and
// patches the new index, and if the finalizer (or the object) is already gone it changes nothing. When the finding
// says so (thenSync), it then terminates the operation that waited on the hook, if still running, and syncs the
// same revision again.
func (r *Remedies) RemoveHookFinalizer(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionRemoveHookFinalizer, DryRun: dryRun}
	t, o, patch, patchType, err := patchOf(f, rules.JSONPatchType)
	if err != nil {
		return out, err
	}
	p := f.Remedy.Params
	thenSync := p[rules.ParamThenSync] == "true"
	if dryRun {
		out.Steps = append(out.Steps, fmt.Sprintf("PatchResource app=%s %s %s: %s (test, then remove exactly %s)", t, o, patchType, patch, rules.HookFinalizer))
		if thenSync {
			out.Steps = append(out.Steps, r.resyncPlan(t, p)...)
		}
		return out, nil
	}
	if step, done, err := r.beforePatch(ctx, t, p); done || err != nil {
		out.Steps = append(out.Steps, step)
		return out, err
	}
	step, changed, err := r.removeFinalizer(ctx, t, o, p[rules.ParamUID], patch, patchType)
	out.Steps = append(out.Steps, step)
	out.Changed = changed
	if err != nil {
		return out, err
	}
	if thenSync {
		res, err := r.resync(ctx, t, p)
		out.Steps = append(out.Steps, res.Steps...)
		out.Changed = out.Changed || res.Changed
		return out, err
	}
	return out, nil
}

// beforePatch reads the application again at execution time: when a newer operation than the finding's started,
// or a new sync was requested after it finished, the hook may already belong to that operation, so nothing is
// changed (done). When the finding asks for a sync afterwards, it also checks that the sync would be accepted
// (checkResync) before anything is patched.
func (r *Remedies) beforePatch(ctx context.Context, t argocd.AppRef, p map[string]string) (step string, done bool, err error) {
	app, err := r.getApp(ctx, t)
	if err != nil {
		return "Get failed", false, err
	}
	if newerOperation(app, p[rules.ParamOperationStartedAt]) {
		return fmt.Sprintf("app=%s has a newer operation than the finding's: nothing to do (its hooks are the new operation's)", t), true, nil
	}
	if p[rules.ParamThenSync] != "true" {
		return "", false, nil
	}
	if step, err := r.checkResync(ctx, t, app, syncRequest(t, app, p)); err != nil {
		return step, false, err
	}
	return "", false, nil
}

// newerOperation reports whether the application moved past the finding's operation: superseded, or that
// operation completed and a new sync is requested (.operation set again, not yet started by the controller).
func newerOperation(app *v1alpha1.Application, startedAt string) bool {
	if superseded(app, startedAt) {
		return true
	}
	st := app.Status.OperationState
	return st != nil && st.Phase.Completed() && app.Operation != nil
}

// patchTestAttempts bounds how often removeFinalizer re-reads the object and patches again after the JSON patch's
// test failed because the finalizer list changed in between.
const patchTestAttempts = 3

// removeFinalizer applies the test-and-remove patch. A failed test (HTTP 422 from the apiserver, which Argo CD
// returns as InvalidArgument), a gone object or a transient error make it read the object again: a finalizer (or an
// object) already gone is success with nothing changed, an object with another UID than the finding's (uid, when
// known) is a new object and is left alone, and a finalizer that moved is patched at its new index.
func (r *Remedies) removeFinalizer(ctx context.Context, t argocd.AppRef, o resourceOf, uid, patch, patchType string) (step string, changed bool, err error) {
	for attempt := 1; ; attempt++ {
		if err := syncmedic.BeforeWrite(ctx, fmt.Sprintf("PatchResource app=%s %s", t, o)); err != nil {
			return fmt.Sprintf("PatchResource app=%s %s not sent: the policy refused it right before it", t, o), false, err
		}
		_, perr := r.o.Client.PatchResource(ctx, r.patchRequest(t, o, patch, patchType))
		if perr == nil {
			r.o.Log.Info("removed hook finalizer", "app", t.String(), "action", syncmedic.ActionRemoveHookFinalizer, "subject", o.String())
			step = fmt.Sprintf("PatchResource app=%s %s: removed %s", t, o, rules.HookFinalizer)
			if attempt > 1 {
				step += fmt.Sprintf(" (the finalizer list had changed; patched again after reading it, attempt %d)", attempt)
			}
			return step, true, nil
		}
		cerr := argocd.Classify(argocd.CallPatchResource, t.String(), perr)
		testFailed := status.Code(perr) == codes.InvalidArgument
		if syncmedic.IsPermanent(cerr) && !argocd.IsNotFound(perr) && !testFailed {
			return "PatchResource refused", false, cerr
		}
		live, gerr := r.getResource(ctx, t, o)
		if gerr != nil {
			if argocd.IsNotFound(gerr) || argocd.IsNotFound(perr) {
				return fmt.Sprintf("%s is gone: nothing to remove", o), false, nil
			}
			return "PatchResource failed", false, cerr
		}
		if uid != "" && string(live.GetUID()) != uid {
			return fmt.Sprintf("%s is a new object (uid %s, the finding's was %s): nothing to change", o, live.GetUID(), uid), false, nil
		}
		idx := rules.FinalizerIndex(live, rules.HookFinalizer)
		if idx < 0 {
			return fmt.Sprintf("%s no longer has %s: nothing to remove", o, rules.HookFinalizer), false, nil
		}
		again := rules.RemoveFinalizerPatch(idx, rules.HookFinalizer, uid)
		if (again == patch && patchType == rules.JSONPatchType) || attempt >= patchTestAttempts {
			// The same patch would fail the same way (the rejection was not the test), or the list keeps moving.
			return "PatchResource failed", false, cerr
		}
		patch, patchType = again, rules.JSONPatchType
	}
}

// TerminateAndResync terminates the application's running operation, waits on the watch for its phase to leave
// Running/Terminating, then syncs the same revision with the same sync options, retrying "another operation is
// already in progress" with backoff. If a newer operation has started since the finding, or the finding's operation
// ended by itself, it does nothing. Its dry run reads the application: the plan names the operation it is for, and
// is refused (a permanent error) once that operation ended.
func (r *Remedies) TerminateAndResync(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionTerminateAndResync, DryRun: dryRun}
	t, err := targetOf(f)
	if err != nil {
		return out, err
	}
	if dryRun {
		step, err := r.planResync(ctx, t, f.Remedy.Params)
		out.Steps = append([]string{step}, r.resyncPlan(t, f.Remedy.Params)...)
		return out, err
	}
	res, err := r.resync(ctx, t, f.Remedy.Params)
	res.Action, res.DryRun = out.Action, false
	return res, err
}

// TerminateOperation only terminates the running operation; an operation that already stopped is left alone.
func (r *Remedies) TerminateOperation(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionTerminateOperation, DryRun: dryRun}
	t, err := targetOf(f)
	if err != nil {
		return out, err
	}
	if dryRun {
		out.Steps = []string{fmt.Sprintf("TerminateOperation app=%s (if its operation is still Running, and on Argo CD before v3.6.0 only if no sync window blocks it)", t)}
		return out, nil
	}
	step, changed, err := r.terminate(ctx, t, f.Remedy.Params, true)
	out.Steps, out.Changed = []string{step}, changed
	return out, err
}

// HardRefresh asks Argo CD for a hard refresh (the argocd.argoproj.io/refresh=hard annotation, set by the server).
func (r *Remedies) HardRefresh(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionHardRefresh, DryRun: dryRun}
	t, err := targetOf(f)
	if err != nil {
		return out, err
	}
	out.Steps = []string{fmt.Sprintf("Get app=%s refresh=hard", t)}
	if dryRun {
		return out, nil
	}
	q := t.Query()
	q.Refresh = strPtr(string(v1alpha1.RefreshTypeHard))
	if err := syncmedic.BeforeWrite(ctx, out.Steps[0]); err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := r.o.Client.Get(ctx, q); err != nil {
		return out, argocd.Classify(argocd.CallGet, t.String(), err)
	}
	out.Changed = true
	return out, nil
}

// ForceFinalizerRemoval sets spec.artifactGC.forceFinalizerRemoval on an Argo Workflow that an Argo CD application
// manages, with PatchResource (a merge patch, idempotent by nature). It reads the live Workflow first, in a dry run
// too, and refuses with a permanent error, writing nothing, when status.artifactGCStatus.podsRecouped is empty: the
// workflow controller ignores the field on a workflow for which it created no garbage-collection Pod
// (argo-workflows #13499), so a stale finding cannot apply it either.
func (r *Remedies) ForceFinalizerRemoval(ctx context.Context, f syncmedic.Finding, dryRun bool) (syncmedic.Outcome, error) {
	out := syncmedic.Outcome{Action: syncmedic.ActionForceFinalizerRemoval, DryRun: dryRun}
	t, o, patch, patchType, err := patchOf(f, "")
	if err != nil {
		return out, err
	}
	live, err := r.getResource(ctx, t, o)
	if err != nil {
		if argocd.IsNotFound(err) {
			out.Steps = []string{fmt.Sprintf("%s is gone: nothing to patch", o)}
			return out, nil
		}
		return out, argocd.Classify(argocd.CallGetResource, t.String(), err)
	}
	if pods, _, _ := unstructured.NestedMap(live.Object, "status", "artifactGCStatus", "podsRecouped"); len(pods) == 0 {
		out.Steps = []string{fmt.Sprintf("refused: nothing written to %s: %s Remove the finalizer by hand (the commands of the finding).", o, forceIgnored)}
		return out, syncmedic.Permanent(fmt.Errorf("refusing to patch %s: %s", o, forceIgnored))
	}
	if v, _, _ := unstructured.NestedBool(live.Object, "spec", "artifactGC", "forceFinalizerRemoval"); v {
		out.Steps = []string{fmt.Sprintf("%s already has spec.artifactGC.forceFinalizerRemoval=true; waiting for the workflow controller", o)}
		return out, nil
	}
	out.Steps = []string{fmt.Sprintf("PatchResource app=%s %s %s: %s", t, o, patchType, patch)}
	if dryRun {
		return out, nil
	}
	if err := syncmedic.BeforeWrite(ctx, fmt.Sprintf("PatchResource app=%s %s", t, o)); err != nil {
		return out, err
	}
	if _, err := r.o.Client.PatchResource(ctx, r.patchRequest(t, o, patch, patchType)); err != nil {
		return out, argocd.Classify(argocd.CallPatchResource, t.String(), err)
	}
	out.Changed = true
	out.Steps = append(out.Steps, "patch written: the workflow controller removes the artifact-gc finalizer itself on its next pass over the Workflow, "+
		"once its garbage-collection Pods have ended; the Workflow stays until it does")
	return out, nil
}

// forceIgnored says why ForceFinalizerRemoval refuses a Workflow whose status.artifactGCStatus.podsRecouped is
// empty (kube.NoEffectReason says the same for the findings).
const forceIgnored = "spec.artifactGC.forceFinalizerRemoval has no effect here: the workflow controller honours it only once the garbage-collection Pods it created have ended, " +
	"and it created none (status.artifactGCStatus.podsRecouped is empty: nothing to collect, argo-workflows #13499)."

func strPtr(s string) *string { return &s }

func boolParam(p map[string]string, k string) bool { b, _ := strconv.ParseBool(p[k]); return b }

func splitParam(p map[string]string, k string) []string {
	if p[k] == "" {
		return nil
	}
	return strings.Split(p[k], ",")
}
