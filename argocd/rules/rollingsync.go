package rules

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// The statuses the ApplicationSet controller records for each Application of a RollingSync in
// status.applicationStatus (v2.14.21 applicationset/controllers/applicationset_controller.go writes them as strings,
// v3.6.1 names them v1alpha1.ProgressiveSync*): Waiting for its step, Pending once the step may sync it (the
// controller then sets .operation), Progressing once a sync started, Healthy once the Application is Healthy and
// Synced.
const (
	RolloutWaiting     = "Waiting"
	RolloutPending     = "Pending"
	RolloutProgressing = "Progressing"
	RolloutHealthy     = "Healthy"
)

// AppSetObservation is what argocd/rollingsync-stalled reads about one ApplicationSet.
type AppSetObservation struct {
	// Instance names the Argo CD the ApplicationSet was seen through ("" for the only one).
	Instance string
	// AppSet is the ApplicationSet with its status, as the Kubernetes API (or `kubectl get applicationset -o yaml`)
	// returns it.
	AppSet *v1alpha1.ApplicationSet
	// Apps are the Applications of the ApplicationSet's namespace by name: the controller names the Application of
	// each status.applicationStatus entry by its name alone. An entry whose Application is absent is not judged.
	Apps map[string]*v1alpha1.Application
	// UIURL is the base URL of the Argo CD UI, used for links ("" when not configured).
	UIURL string
}

// RollingSyncEnabled reports whether the ApplicationSet rolls out in steps: strategy RollingSync with at least one
// step (progressiveSyncsRollingSyncStrategyEnabled in v2.14.21, RollingSyncStrategyEnabled in v3.6.1). Its
// status.applicationStatus is kept only when the controller runs with --enable-progressive-syncs.
func RollingSyncEnabled(as *v1alpha1.ApplicationSet) bool {
	s := as.Spec.Strategy
	return s != nil && s.Type == "RollingSync" && s.RollingSync != nil && len(s.RollingSync.Steps) > 0
}

// RollingSyncStalled reports a RollingSync step that never completes (argo-cd #19771): the ApplicationSet controller
// starts step N+1 only when every Application of step N has the status Healthy (buildAppSyncMap in v2.14.21,
// getAppsToSync in v3.6.1), and an entry leaves Pending or Progressing for Healthy only when its Application is
// Healthy and Synced (v2.14.21 also wants no failed operation). The controller neither retries a failed sync (v3.6.1:
// "It is not the appset's job to retry failed syncs") nor repairs an unhealthy resource, and RollingSync turns the
// Applications' automated sync off, so such a step holds every later one until a person acts.
//
// The step judged is the first one with an entry that is not Healthy (the step the controller is rolling out). Its
// entries that are Pending or Progressing for longer than the threshold (from the entry's lastTransitionTime), whose
// Application is not Healthy and Synced, hold it. Nothing is reported while a step is rolling out within the
// threshold, while its entries only wait (maxUpdate 0 stops a step on purpose: its Applications stay Waiting), while a
// sync window the person set blocks the holding sync, or for an ApplicationSet being deleted.
func RollingSyncStalled(obs AppSetObservation, now time.Time, th Thresholds) []syncmedic.Finding {
	as := obs.AppSet
	if as == nil || as.DeletionTimestamp != nil || !RollingSyncEnabled(as) {
		return nil
	}
	step := currentRolloutStep(as)
	if step == 0 {
		return nil
	}
	var holders []rolloutHolder
	for _, e := range stepEntries(as, step) {
		if h, ok := holding(e, obs.Apps[e.Application], now, th.RollingSyncStalled); ok {
			holders = append(holders, h)
		}
	}
	if len(holders) == 0 {
		return nil
	}
	since := holders[0].since
	for _, h := range holders[1:] {
		if h.since.Before(since) {
			since = h.since
		}
	}
	steps := len(as.Spec.Strategy.RollingSync.Steps)
	later := laterEntries(as, step)
	f := syncmedic.NewFinding(syncmedic.RuleRollingSyncStalled, appSetObjectRef(obs),
		fmt.Sprintf("RollingSync of ApplicationSet %s is held at step %d of %d for %s: %s%s",
			appSetName(as), step, steps, syncmedic.HumanDuration(now.Sub(since)), holderSummary(holders), laterSummary(later)))
	f.Since = since
	f.Evidence = rolloutEvidence(as, step, holders, later)
	f.Remedy = rolloutRemedy(as, step, holders)
	f.Links = holderLinks(obs, holders)
	f.Related = holderRefs(obs, holders)
	return []syncmedic.Finding{f}
}

// HoldCandidates returns the names of the Applications that may hold the ApplicationSet's rollout at now (entries of
// the current step Pending or Progressing past the threshold): the only ones argocd/rollingsync-stalled needs to
// read. A rollout that is complete, or within its threshold, needs none.
func HoldCandidates(as *v1alpha1.ApplicationSet, now time.Time, th Thresholds) []string {
	if as.DeletionTimestamp != nil || !RollingSyncEnabled(as) {
		return nil
	}
	step := currentRolloutStep(as)
	if step == 0 {
		return nil
	}
	var out []string
	for _, e := range stepEntries(as, step) {
		if (e.Status == RolloutPending || e.Status == RolloutProgressing) && e.LastTransitionTime != nil && now.Sub(e.LastTransitionTime.Time) >= th.RollingSyncStalled {
			out = append(out, e.Application)
		}
	}
	return out
}

// rolloutHolder is one Application that holds a step, with its status entry.
type rolloutHolder struct {
	entry v1alpha1.ApplicationSetApplicationStatus
	app   *v1alpha1.Application
	since time.Time
}

// currentRolloutStep returns the first step (1-based) with an entry that is not Healthy, or 0 when every step is
// complete. Entries of no step ("-1": no step selects the Application) never hold a rollout.
func currentRolloutStep(as *v1alpha1.ApplicationSet) int {
	first := 0
	for _, e := range as.Status.ApplicationStatus {
		n, ok := entryStep(as, e)
		if !ok || e.Status == RolloutHealthy {
			continue
		}
		if first == 0 || n < first {
			first = n
		}
	}
	return first
}

// entryStep parses an entry's step, valid when it names one of the ApplicationSet's steps.
func entryStep(as *v1alpha1.ApplicationSet, e v1alpha1.ApplicationSetApplicationStatus) (int, bool) {
	n, err := strconv.Atoi(e.Step)
	return n, err == nil && n >= 1 && n <= len(as.Spec.Strategy.RollingSync.Steps)
}

// stepEntries returns the entries of one step, in the order the status lists them.
func stepEntries(as *v1alpha1.ApplicationSet, step int) []v1alpha1.ApplicationSetApplicationStatus {
	var out []v1alpha1.ApplicationSetApplicationStatus
	for _, e := range as.Status.ApplicationStatus {
		if n, ok := entryStep(as, e); ok && n == step {
			out = append(out, e)
		}
	}
	return out
}

// laterEntries returns the entries of the steps after step that are not Healthy: the Applications the stalled step
// keeps waiting.
func laterEntries(as *v1alpha1.ApplicationSet, step int) []v1alpha1.ApplicationSetApplicationStatus {
	var out []v1alpha1.ApplicationSetApplicationStatus
	for _, e := range as.Status.ApplicationStatus {
		if n, ok := entryStep(as, e); ok && n > step && e.Status != RolloutHealthy {
			out = append(out, e)
		}
	}
	return out
}

// holding reports whether the entry holds its step: Pending or Progressing past the threshold while its Application
// is not Healthy and Synced, and no sync window blocks the Application's sync.
func holding(e v1alpha1.ApplicationSetApplicationStatus, app *v1alpha1.Application, now time.Time, threshold time.Duration) (rolloutHolder, bool) {
	if e.Status != RolloutPending && e.Status != RolloutProgressing || e.LastTransitionTime == nil || app == nil {
		return rolloutHolder{}, false
	}
	since := e.LastTransitionTime.Time
	if now.Sub(since) < threshold || settled(app) || blockedBySyncWindow(app) {
		return rolloutHolder{}, false
	}
	return rolloutHolder{entry: e, app: app, since: since}, true
}

// settled reports whether the Application is Healthy and Synced with no operation left unfinished or failed: the
// state in which both controllers move its entry to Healthy on their next pass (isApplicationHealthy in v2.14.21;
// v3.6.1 only wants Healthy and Synced).
func settled(app *v1alpha1.Application) bool {
	if app.Status.Health.Status != health.HealthStatusHealthy || app.Status.Sync.Status != v1alpha1.SyncStatusCodeSynced {
		return false
	}
	op := app.Status.OperationState
	return op == nil || op.Phase == synccommon.OperationSucceeded
}

// blockedBySyncWindow reports whether the Application's sync is Running but held by a sync window: a wait the person
// configured, which ends with the window.
func blockedBySyncWindow(app *v1alpha1.Application) bool {
	op := app.Status.OperationState
	return op != nil && op.Phase == synccommon.OperationRunning && strings.HasPrefix(op.Message, SyncWindowBlockedMessage)
}

// healthAndSync renders an Application's health and sync status ("Degraded/Synced"), with its last sync when that did not
// succeed.
func healthAndSync(app *v1alpha1.Application) string {
	s := orUnknown(string(app.Status.Health.Status)) + "/" + orUnknown(string(app.Status.Sync.Status))
	if op := app.Status.OperationState; op != nil && op.Phase != synccommon.OperationSucceeded {
		s += ", sync " + string(op.Phase)
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// holderSummary names the holding Applications and their state, e.g. "shop-eu is Degraded/Synced".
func holderSummary(hs []rolloutHolder) string {
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		parts = append(parts, h.entry.Application+" is "+healthAndSync(h.app))
	}
	return strings.Join(parts, ", ")
}

// laterSummary says how many Applications of later steps wait ("" when none).
func laterSummary(later []v1alpha1.ApplicationSetApplicationStatus) string {
	switch len(later) {
	case 0:
		return ""
	case 1:
		return "; 1 application of a later step waits"
	default:
		return fmt.Sprintf("; %d applications of later steps wait", len(later))
	}
}

// maxLaterListed bounds the Applications of later steps an evidence line names.
const maxLaterListed = 10

// rolloutEvidence lists the step, each holding Application with its entry, health, sync and last operation, the
// Applications of later steps that wait, and the controller's RolloutProgressing condition.
func rolloutEvidence(as *v1alpha1.ApplicationSet, step int, hs []rolloutHolder, later []v1alpha1.ApplicationSetApplicationStatus) []syncmedic.Evidence {
	ev := []syncmedic.Evidence{{Field: "strategy", Value: fmt.Sprintf("RollingSync, step %d of %d selects %s", step, len(as.Spec.Strategy.RollingSync.Steps), selectorOf(as.Spec.Strategy.RollingSync.Steps[step-1]))}}
	for _, h := range hs {
		ev = append(ev, holderEvidence(h)...)
	}
	if len(later) > 0 {
		names := make([]string, 0, len(later))
		for i, e := range later {
			if i == maxLaterListed {
				names = append(names, fmt.Sprintf("and %d more", len(later)-maxLaterListed))
				break
			}
			names = append(names, fmt.Sprintf("%s (step %s, %s)", e.Application, e.Step, e.Status))
		}
		ev = append(ev, syncmedic.Evidence{Field: "waiting in later steps", Value: strings.Join(names, ", ")})
	}
	for _, c := range as.Status.Conditions {
		if c.Type == v1alpha1.ApplicationSetConditionRolloutProgressing {
			ev = append(ev, syncmedic.Evidence{Field: "condition RolloutProgressing", Value: string(c.Status) + ": " + c.Message})
		}
	}
	return ev
}

// holderEvidence says what holds one Application: its status entry, its health, its sync status and its last
// operation.
func holderEvidence(h rolloutHolder) []syncmedic.Evidence {
	name, app := h.entry.Application, h.app
	since := h.since
	ev := []syncmedic.Evidence{{Field: "app " + name, Value: fmt.Sprintf("%s in the ApplicationSet's status since %s: %s", h.entry.Status, since.UTC().Format(time.RFC3339), h.entry.Message), Since: &since}}
	hv := orUnknown(string(app.Status.Health.Status))
	if m := app.Status.Health.Message; m != "" {
		hv += ": " + m
	}
	ev = append(ev, syncmedic.Evidence{Field: "app " + name + " health", Value: hv})
	sv := orUnknown(string(app.Status.Sync.Status))
	if r := app.Status.Sync.Revision; r != "" {
		sv += " at " + shortRevision(r)
	}
	ev = append(ev, syncmedic.Evidence{Field: "app " + name + " sync", Value: sv})
	if op := app.Status.OperationState; op != nil {
		ov := string(op.Phase)
		if op.Message != "" {
			ov += ": " + op.Message
		}
		ev = append(ev, syncmedic.Evidence{Field: "app " + name + " last sync", Value: ov})
	}
	return ev
}

// selectorOf renders a step's matchExpressions the way kubectl prints label selectors ("env in (eu,us)").
func selectorOf(s v1alpha1.ApplicationSetRolloutStep) string {
	if len(s.MatchExpressions) == 0 {
		return "every application"
	}
	parts := make([]string, 0, len(s.MatchExpressions))
	for _, m := range s.MatchExpressions {
		vals := append([]string(nil), m.Values...)
		sort.Strings(vals)
		parts = append(parts, fmt.Sprintf("%s %s (%s)", m.Key, strings.ToLower(m.Operator), strings.Join(vals, ",")))
	}
	return strings.Join(parts, ", ")
}

// rolloutRemedy is the fix a person takes: nothing runs unattended, since only a person knows whether the holding
// sync should be repaired, rolled back or the rollout stopped.
func rolloutRemedy(as *v1alpha1.ApplicationSet, step int, hs []rolloutHolder) syncmedic.Remedy {
	var cmds []string
	for _, h := range hs {
		cmds = append(cmds, "argocd app get "+appSetAppName(as, h.entry.Application))
	}
	for _, h := range hs {
		cmds = append(cmds, "argocd app sync "+appSetAppName(as, h.entry.Application))
	}
	desc := "The ApplicationSet controller starts the next step only once every application of this step is Healthy and Synced; it does not retry a failed sync nor repair an unhealthy resource, " +
		"and RollingSync turns the applications' automated sync off. Read why each application above is not Healthy and Synced (its failed sync, its unhealthy resources), fix that in Git or in the cluster, " +
		"then sync it (argocd app sync): the rollout continues by itself once it is Healthy and Synced."
	if n := len(as.Spec.Strategy.RollingSync.Steps); step < n {
		cmds = append(cmds, pauseCommand(as, step, n))
		desc += " To keep the later steps from starting when it does (to roll back instead), first set their maxUpdate to 0 (the last command; " +
			"change it in Git instead when Argo CD manages the ApplicationSet itself)."
	}
	return syncmedic.Remedy{Action: syncmedic.ActionNone, Description: desc, Commands: cmds}
}

// pauseCommand sets maxUpdate 0 on every step after step (0 updates no Application of a step: Progressive Syncs
// documentation), as one JSON patch.
func pauseCommand(as *v1alpha1.ApplicationSet, step, steps int) string {
	ops := make([]string, 0, steps-step)
	for i := step; i < steps; i++ {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/spec/strategy/rollingSync/steps/%d/maxUpdate","value":0}`, i))
	}
	ns := ""
	if as.Namespace != "" {
		ns = "-n " + as.Namespace + " "
	}
	return fmt.Sprintf("kubectl %spatch applicationset %s --type json -p '[%s]'", ns, as.Name, strings.Join(ops, ","))
}

// appSetName is "namespace/name" of the ApplicationSet.
func appSetName(as *v1alpha1.ApplicationSet) string {
	if as.Namespace != "" {
		return as.Namespace + "/" + as.Name
	}
	return as.Name
}

// appSetAppName is how the argocd CLI names an Application of the ApplicationSet (in the ApplicationSet's namespace).
func appSetAppName(as *v1alpha1.ApplicationSet, name string) string {
	if as.Namespace != "" {
		return as.Namespace + "/" + name
	}
	return name
}

// appSetObjectRef names the ApplicationSet; its template's project routes the finding when it is not templated.
func appSetObjectRef(obs AppSetObservation) syncmedic.ObjectRef {
	as := obs.AppSet
	o := syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Instance: obs.Instance, Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet",
		Namespace: as.Namespace, Name: as.Name, UID: string(as.UID), Labels: as.Labels,
		SlackChannel: strings.TrimSpace(as.Annotations[syncmedic.SlackChannelAnnotation])}
	if p := as.Spec.Template.Spec.Project; !strings.Contains(p, "{{") {
		o.Project = p
	}
	return o
}

// holderRefs names each holding Application as the Application rules name theirs (App, AppNamespace and Project
// set), so the Argo CD extension shows the rollout's finding on the page of the Application that holds the step.
func holderRefs(obs AppSetObservation, hs []rolloutHolder) []syncmedic.ObjectRef {
	out := make([]syncmedic.ObjectRef, 0, len(hs))
	for _, h := range hs {
		a := h.app
		out = append(out, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Instance: obs.Instance, Group: "argoproj.io", Version: "v1alpha1",
			Kind: "Application", Namespace: a.Namespace, Name: a.Name, UID: string(a.UID), App: a.Name, AppNamespace: a.Namespace, Project: a.Spec.Project})
	}
	return out
}

// holderLinks links the Argo CD UI page of each holding Application.
func holderLinks(obs AppSetObservation, hs []rolloutHolder) []syncmedic.Link {
	if obs.UIURL == "" {
		return nil
	}
	var out []syncmedic.Link
	for _, h := range hs {
		u := strings.TrimRight(obs.UIURL, "/") + "/applications/" + url.PathEscape(h.app.Namespace) + "/" + url.PathEscape(h.app.Name)
		out = append(out, syncmedic.Link{Title: "Argo CD: " + appSetAppName(obs.AppSet, h.entry.Application), URL: u})
	}
	return out
}
