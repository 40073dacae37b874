package remedy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// windowVerdict is what the sync windows assigned to an application say about one kind of sync right now.
type windowVerdict struct {
	allowed bool
	// why names the windows that decide, for the step and the error.
	why string
}

// evaluateWindows decides, from argocd-server's GetApplicationSyncWindows answer, whether a sync that is manual
// (isManual) or not may run now. It is SyncWindows.CanSync (argo-cd v2.14.21 and v3.6.1
// pkg/apis/application/v1alpha1) computed on the server's own lists: ActiveWindows are the assigned windows active
// now (the server applies their time zones), AssignedWindows all the windows matching the application.
//
//   - an active deny window blocks, unless the sync is manual and every active deny window has manualSync;
//   - otherwise an active allow window allows;
//   - otherwise an assigned allow window (then inactive) blocks, unless the sync is manual and every such window has
//     manualSync;
//   - no window allows.
//
// The answer's own CanSync is CanSync(true): what a person syncing from the UI may do. An unattended remedy asks
// with isManual false, as the controller does for an automated operation.
func evaluateWindows(res *application.ApplicationSyncWindowsResponse, isManual bool) windowVerdict {
	var denies, allows, inactiveAllows []*application.ApplicationSyncWindow
	for _, w := range res.ActiveWindows {
		switch w.GetKind() {
		case "deny":
			denies = append(denies, w)
		case "allow":
			allows = append(allows, w)
		}
	}
	switch {
	case len(denies) > 0:
		if isManual && allManual(denies) {
			return windowVerdict{allowed: true, why: "active deny window allows manual syncs: " + describeWindows(denies)}
		}
		return windowVerdict{why: "active deny window " + describeWindows(denies)}
	case len(allows) > 0:
		return windowVerdict{allowed: true, why: "active allow window " + describeWindows(allows)}
	}
	for _, w := range res.AssignedWindows {
		if w.GetKind() == "allow" {
			inactiveAllows = append(inactiveAllows, w)
		}
	}
	if len(inactiveAllows) == 0 {
		return windowVerdict{allowed: true}
	}
	if isManual && allManual(inactiveAllows) {
		return windowVerdict{allowed: true, why: "outside the allow windows, which allow manual syncs: " + describeWindows(inactiveAllows)}
	}
	return windowVerdict{why: "outside every allow window (" + describeWindows(inactiveAllows) + ")"}
}

func allManual(ws []*application.ApplicationSyncWindow) bool {
	for _, w := range ws {
		if !w.GetManualSync() {
			return false
		}
	}
	return true
}

func describeWindows(ws []*application.ApplicationSyncWindow) string {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = fmt.Sprintf("%s %q for %s", w.GetKind(), w.GetSchedule(), w.GetDuration())
		if w.GetManualSync() {
			names[i] += " (manualSync)"
		}
	}
	return strings.Join(names, "; ")
}

// syncWindows asks argocd-server for the application's sync windows.
func (r *Remedies) syncWindows(ctx context.Context, t argocd.AppRef) (*application.ApplicationSyncWindowsResponse, error) {
	q := &application.ApplicationSyncWindowsQuery{Name: strPtr(t.Name)}
	if t.Namespace != "" {
		q.AppNamespace = strPtr(t.Namespace)
	}
	if t.Project != "" {
		q.Project = strPtr(t.Project)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := r.o.Client.GetApplicationSyncWindows(cctx, q)
	if err != nil {
		return nil, argocd.Classify(argocd.CallSyncWindows, t.String(), err)
	}
	return res, nil
}

// checkSyncWindows refuses an unattended sync that a sync window blocks now: a deny window is active (even one that
// allows manual syncs: syncmedic's sync is not a person's), or the project has allow windows and none is active.
// The error is retryable: the remedy runs again once the window has passed.
func (r *Remedies) checkSyncWindows(ctx context.Context, t argocd.AppRef) (string, error) {
	res, err := r.syncWindows(ctx, t)
	if err != nil {
		return "GetApplicationSyncWindows failed: not terminating", err
	}
	v := evaluateWindows(res, false)
	if v.allowed {
		return "", nil
	}
	step := fmt.Sprintf("app=%s: a sync window blocks unattended syncs now (%s): not terminating its operation", t, v.why)
	return step, fmt.Errorf("argocd %s %s: a sync window of project %q blocks unattended syncs now (%s), so the operation "+
		"was left running rather than terminated with no way to sync again; retried after the window", argocd.CallSyncWindows, t, t.Project, v.why)
}

// terminateExemptFromWindows is the first Argo CD release whose controller processes a Terminating operation while
// a sync window blocks syncs (v3.6.0 controller/sync.go: `isBlocked && state.Phase != OperationTerminating`).
// v2.14.21 and v3.0.12 to v3.5.0 run the window check first and leave the operation Terminating until the window
// ends (argo-cd #20799, #25361).
var terminateExemptFromWindows = rules.Version{Major: 3, Minor: 6, Patch: 0}

// windowsBlockTerminate reports whether the controller of an Argo CD server of this version skips a Terminating
// operation while a sync window blocks it. An unknown or unparsable version counts as blocking, to be safe.
func windowsBlockTerminate(serverVersion string) bool {
	v, ok := releaseVersion(serverVersion)
	return !ok || v.Less(terminateExemptFromWindows)
}

// releaseVersion parses a release version; Argo CD's unstamped development version (v99.99.99, what a build
// without -X common.version reports) is no release and counts as unknown.
func releaseVersion(s string) (rules.Version, bool) {
	v, ok := rules.ParseVersion(s)
	return v, ok && v.Major != 99
}

// checkTerminateWindows refuses a TerminateOperation that the controller would not carry out now: on servers whose
// controller checks sync windows before it handles Terminating (see windowsBlockTerminate), a window that blocks
// the operation (judged as the controller judges it: manual unless the operation was started by auto-sync) would
// leave it Terminating until the window ends. The error is retryable.
func (r *Remedies) checkTerminateWindows(ctx context.Context, t argocd.AppRef, app *v1alpha1.Application) (string, error) {
	ver := r.serverVersion(ctx)
	if !windowsBlockTerminate(ver) {
		return "", nil
	}
	res, err := r.syncWindows(ctx, t)
	if err != nil {
		return "GetApplicationSyncWindows failed: not terminating", err
	}
	isManual := true
	if st := app.Status.OperationState; st != nil {
		isManual = !st.Operation.InitiatedBy.Automated
	}
	v := evaluateWindows(res, isManual)
	if v.allowed {
		return "", nil
	}
	shown := ver
	if shown == "" {
		shown = "of unknown version"
	}
	step := fmt.Sprintf("app=%s: a sync window blocks its operation now (%s), and Argo CD %s would leave a terminated operation Terminating until the window ends: not terminating", t, v.why, shown)
	return step, fmt.Errorf("argocd %s %s: a sync window of project %q blocks the operation now (%s); the application controller of Argo CD %s "+
		"does not process a Terminating operation while a window blocks it (argo-cd #20799, #25361; v3.6.0 exempts it), so the "+
		"operation was not terminated; retried after the window", argocd.CallTerminateOperation, t, t.Project, v.why, shown)
}

// serverVersion asks the Version API ("" when it fails: callers treat an unknown version as the riskier one).
func (r *Remedies) serverVersion(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := r.o.Client.Version(cctx, &emptypb.Empty{})
	if err != nil {
		r.o.Log.Warn("argocd Version failed: the server's version is taken as unknown", "error", err)
		return ""
	}
	return v.GetVersion()
}
