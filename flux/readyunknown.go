package flux

import (
	"fmt"
	"regexp"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"

	"github.com/syncmedic/syncmedic"
)

// actionTimeout reads the timeout helm-controller v1.x names when it starts a release action: "Running 'install'
// action with timeout of 5m0s" (internal/reconcile/atomic_release.go, v1.4.3 l. 262).
var actionTimeout = regexp.MustCompile(`Running '[a-z-]+' action with timeout of ([0-9a-zµ.]+)`)

// ReadyUnknownStuck reports a HelmRelease whose Ready condition has been Unknown — "Running 'install' action with
// timeout of …" or "reconciliation in progress", reason Progressing — for longer than the action's timeout plus the
// threshold (fluxcd/helm-controller #1101, #1409). helm-controller v1.x writes that condition before it runs a Helm
// action and replaces it when the action ends; the action itself gives up at its timeout (Helm's wait). A release
// still Unknown well past it is one no helm-controller is finishing: the controller died, was stopped or restarted
// mid-action, or missed the object. The Helm storage's record of the release (Storage) shows what was really done:
// "deployed" while the status still says in progress, or "pending-install"/"pending-upgrade" left by the
// interrupted action.
//
// Nothing is reported for a suspended or deleted release (other rules' and the person's), nor within the timeout
// plus threshold. The remedy is a plain reconcile request (reconcile.fluxcd.io/requestedAt, what `flux reconcile
// hr` writes): a helm-controller that runs handles it, never a forced upgrade or reset.
func ReadyUnknownStuck(obs ReleaseObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	hr := obs.Release
	ready := condition(hr, meta.ReadyCondition)
	if ready == nil || ready.Status != "Unknown" || hr.Spec.Suspend || hr.DeletionTimestamp != nil {
		return nil
	}
	since := ready.LastTransitionTime.Time
	timeout := releaseActionTimeout(hr, ready.Message)
	if now.Sub(since) < timeout+th.ReadyUnknown {
		return nil
	}
	name, ns := StorageRelease(hr)
	summary := fmt.Sprintf("HelmRelease %s/%s has been in progress for %s, past its %s timeout: %q", hr.Namespace, hr.Name,
		syncmedic.HumanDuration(now.Sub(since)), syncmedic.HumanDuration(timeout), ready.Message)
	if s := obs.Storage; s != nil {
		summary += fmt.Sprintf("; Helm's storage says revision %d is %s", s.Revision, s.Status)
	}
	f := syncmedic.NewFinding(syncmedic.RuleReadyUnknownStuck, releaseRef(hr), summary)
	f.Since = since
	f.Evidence = []syncmedic.Evidence{
		{Field: "Ready", Value: conditionText(hr, meta.ReadyCondition), Since: timePtr(since)},
		{Field: "action timeout", Value: timeout.String()},
	}
	if r := condition(hr, meta.ReconcilingCondition); r != nil {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "Reconciling", Value: conditionText(hr, meta.ReconcilingCondition), Since: timePtr(r.LastTransitionTime.Time)})
	}
	f.Evidence = append(f.Evidence, storageEvidence(obs, name, ns))
	if l := hr.Status.History.Latest(); l != nil {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.history (latest)", Value: fmt.Sprintf("%s.v%d %s, chart %s@%s", l.Name, l.Version, l.Status, l.ChartName, l.ChartVersion)})
	}
	if h := hr.Status.LastHandledReconcileAt; h != "" {
		f.Evidence = append(f.Evidence, syncmedic.Evidence{Field: "status.lastHandledReconcileAt", Value: h})
	}
	f.Remedy = reconcileRemedy(hr, "Ask helm-controller to reconcile the release again (what `flux reconcile hr` does): a running helm-controller picks it up, releases a pending release left by the interrupted action and runs the action again, or records the release Helm already finished. "+
		"If the request stays unhandled (status.lastHandledReconcileAt does not move), helm-controller is not running or not watching this namespace: look at its Pods and logs.")
	f.Remedy.Commands = append(f.Remedy.Commands[:1],
		fmt.Sprintf("kubectl -n %s get secrets -l %s", ns, fmt.Sprintf(HelmStorageSelector, name)),
		fmt.Sprintf("helm -n %s history %s", hr.GetReleaseNamespace(), name),
		"kubectl -n flux-system logs deploy/helm-controller")
	f.Remedy.Params[ParamEscalate] = "false"
	f.Advisories = controllerAdvisories(obs.ControllerVersion)
	return []syncmedic.Finding{f}
}

// storageEvidence says what Helm's storage records for the release, or why it was not read.
func storageEvidence(obs ReleaseObservation, name, ns string) syncmedic.Evidence {
	field := "Helm storage"
	switch {
	case obs.Storage != nil:
		return syncmedic.Evidence{Field: field, Value: obs.Storage.String()}
	case obs.StorageKnown:
		return syncmedic.Evidence{Field: field, Value: fmt.Sprintf("no release %s in namespace %s (nothing installed yet)", name, ns)}
	case obs.StorageProblem != "":
		return syncmedic.Evidence{Field: field, Value: "not read: " + obs.StorageProblem}
	}
	return syncmedic.Evidence{Field: field, Value: fmt.Sprintf("not read (Secrets of type %s in namespace %s, selector %s)", HelmStorageSecretType, ns, fmt.Sprintf(HelmStorageSelector, name))}
}

// releaseActionTimeout is the timeout of the action the Ready message names, else the release's own
// (spec.install.timeout or spec.upgrade.timeout override spec.timeout, 5m by default).
func releaseActionTimeout(hr *helmv2.HelmRelease, msg string) time.Duration {
	if m := actionTimeout.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			return d
		}
	}
	d := hr.GetTimeout().Duration
	if i := hr.Spec.Install; i != nil && i.Timeout != nil && i.Timeout.Duration > d {
		d = i.Timeout.Duration
	}
	if u := hr.Spec.Upgrade; u != nil && u.Timeout != nil && u.Timeout.Duration > d {
		d = u.Timeout.Duration
	}
	return d
}

// ReadyUnknownDeadline is when ReadyUnknownStuck can first report hr, or zero when its Ready is not Unknown.
func ReadyUnknownDeadline(hr *helmv2.HelmRelease, th Thresholds) time.Time {
	ready := condition(hr, meta.ReadyCondition)
	if ready == nil || ready.Status != "Unknown" {
		return time.Time{}
	}
	return ready.LastTransitionTime.Add(releaseActionTimeout(hr, ready.Message) + th.ReadyUnknown)
}
