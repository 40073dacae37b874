package remedy

import (
	"fmt"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// checkProcessing refuses, as a permanent error, to terminate the operation of app when the application-controller
// has not reconciled it (status.reconciledAt) after the instant the finding's evidence dates from
// (rules.ParamEvidenceAt: the hook's finish, the time a hook not found is judged from). Argo CD records a finished
// hook only when its controller processes the app; while the controller is down, restarting or without the shard
// that owns the app, argocd-server still accepts TerminateOperation, and the controller, once back, ends a sync that
// would have succeeded as "Operation terminated" (seen on v2.14.21). A finding without the parameter, and an
// application without reconciledAt (a hand-made status), are not checked.
func checkProcessing(t argocd.AppRef, app *v1alpha1.Application, p map[string]string) (string, error) {
	raw, ok := p[rules.ParamEvidenceAt]
	if !ok {
		return "", nil
	}
	evidenceAt, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return "bad finding", syncmedic.Permanent(fmt.Errorf("argocd %s: the finding's %s %q is not an RFC 3339 time: re-run the scan (or let serve re-evaluate) to get a fresh finding", t, rules.ParamEvidenceAt, raw))
	}
	r := app.Status.ReconciledAt
	if r == nil || r.Time.After(evidenceAt) {
		return "", nil // every Argo CD version writes reconciledAt: an application without it gives no evidence either way
	}
	last := r.UTC().Format(time.RFC3339)
	step := fmt.Sprintf("app=%s: the application-controller has not reconciled it since %s (reconciledAt %s): not terminating", t, raw, last)
	return step, syncmedic.Permanent(fmt.Errorf("argocd %s: not terminating its operation: Argo CD's application-controller has not reconciled the application "+
		"since the evidence of the finding (%s; status.reconciledAt %s), so it has not seen the hook finish and may not be running at all: "+
		"a terminate now would end the sync as \"Operation terminated\" once the controller is back. Check the application-controller "+
		"(its pods and StatefulSet, ARGOCD_CONTROLLER_REPLICAS and the argocd-app-controller-shard-cm ConfigMap, its logs); "+
		"once it reconciles the application, a sync still waiting is found again", t, raw, last))
}
