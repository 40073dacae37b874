package flux_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// helmControllers are the releases issue 26's Flux items are proven on.
var helmControllers = []fluxreal.HelmController{fluxreal.HelmControllerV1, fluxreal.HelmControllerV037}

// A stale status (pre-v2beta2, inherited) on a release whose reconcile fails before the release step: the spec
// change gives the chart template a label the apiserver rejects on the HelmChart, so the real helm-controller's
// server-side apply of the HelmChart fails on every attempt; it handles syncmedic's plain request
// (lastHandledReconcileAt) and leaves every condition as the old controller wrote them. syncmedic on auto writes
// requestedAt and nothing more: no forceAt, which could not fix the template, and which — if the cause is fixed before
// the controller's next attempt (its retry backoff, up to --max-retry-delay; here the controller is stopped meanwhile)
// — forces an upgrade of a release that is in sync (the pre-fix flux/reconcile.go did: Helm revision 2). Once the label
// is removed, the real controller adopts the release and leaves it at its Helm revision.
func TestStaleStatusFailingBeforeTheReleaseStepIsNotForced(t *testing.T) {
	for _, h := range helmControllers {
		t.Run(h.Version, func(t *testing.T) {
			env := testenv.KubePrivate(t)
			t.Parallel()
			// hand-written state: the pre-v2beta2 status (see staleTemplateFailsNotForced and ScenarioPreV2beta2Status).
			staleTemplateFailsNotForced(t, env, h)
		})
	}
}

func staleTemplateFailsNotForced(t *testing.T, env *testenv.Env, h fluxreal.HelmController) {
	row := &conformance.Row{Version: "helm-controller " + h.Version, Scenario: "safety: stale status (pre-v2beta2, hand-written) whose reconcile fails before the release step (HelmChart template rejected), fixed before the next attempt"}
	defer record(t, row)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: h})

	// hand-written state: the status helm-controller <= v0.36 wrote, which no controller here can write (v0.36.x does
	// not download; v0.37.2 already writes the v2beta2 status): see ScenarioPreV2beta2Status.
	sc := stack.ScenarioPreV2beta2StatusTemplateFails(t, ns, repo, "redis")
	revisions := helmRevisions(t, env, ns, "redis")
	require.Equal(t, 1, revisions, "installed once, by the real controller")
	row.Controller = fmt.Sprintf("controller stopped; status as helm-controller ≤ v0.36 wrote it, chart template label %q added (%s)", sc.Label, fluxreal.Describe(sc.Release))
	row.Syncmedic = "no finding"
	d := startServe(t, stack, ns, autoPolicy, "--dependency-not-ready-threshold", "5s", "--stale-status-threshold", staleThreshold)

	root := announcedStale(t, d, "redis")
	var requested string
	require.Eventually(t, func() bool {
		requested = requestAnnotations(stack.Get(t, ns, "redis"))[meta.ReconcileRequestAnnotation]
		return requested != ""
	}, 30*time.Second, 200*time.Millisecond, "auto: the plain reconcile request is written")
	row.Syncmedic = "flux/helmrelease-stale-status announced; auto: requestedAt written"

	require.NoError(t, stack.StartHelmController(h))
	from := d.logLen()
	hr := stack.WaitFor(t, ns, "redis", 60*time.Second, "syncmedic's request handled", handled)
	// The controller's next attempt is its retry backoff away; stopping it holds that gap open, so what syncmedic
	// writes now is what the first attempt after a fix acts on.
	stack.StopHelmController()
	require.Equal(t, requested, hr.Status.LastHandledReconcileAt)
	require.Less(t, hr.Status.ObservedGeneration, hr.Generation, "the real controller stopped before the release step: %s", fluxreal.Describe(hr))
	require.Equal(t, "Release reconciliation succeeded", fluxreal.Condition(hr, meta.ReadyCondition).Message, "the old Ready is left as it was")
	require.Empty(t, hr.Status.History)
	require.Contains(t, stack.Controller.Tail(400), "failed to run server-side apply", "the HelmChart template is what fails")
	row.Controller += fmt.Sprintf("; %s started: the HelmChart's server-side apply fails (invalid label), request handled (lastHandledReconcileAt = requestedAt), status left stale (%s); controller stopped (its retry backoff)",
		h.Version, fluxreal.Describe(hr))

	require.Never(t, func() bool {
		return requestAnnotations(stack.Get(t, ns, "redis"))[helmv2.ForceRequestAnnotation] != ""
	}, quiet, 500*time.Millisecond, "syncmedic escalated to forceAt after a failure before the release step")
	refused := waitThread(t, d, root, "before the release step", "the attempt after the handled request says why it is not forced")
	require.Equal(t, map[string]string{meta.ReconcileRequestAnnotation: requested}, requestAnnotations(stack.Get(t, ns, "redis")), "requestedAt, nothing else")
	evaluated := evaluatedWith(t, d, ns, "redis", from, 1)
	why, _, _ := strings.Cut(refused, ". A forced reconcile")
	if _, after, ok := strings.Cut(why, "still stale, but "); ok {
		why = after
	}
	row.Syncmedic += fmt.Sprintf("; handled with the status still stale: evaluated %d more times, no forceAt within %s, the attempt refused (%s)",
		evaluated, quiet, why)

	sc.FixTemplate(t, stack)
	require.NoError(t, stack.StartHelmController(h))
	hr = stack.WaitFor(t, ns, "redis", 90*time.Second, "reconciled at the new generation", func(hr *helmv2.HelmRelease) bool {
		return fluxreal.IsReady(hr) && hr.Status.ObservedGeneration == hr.Generation && len(hr.Status.History) > 0
	})
	require.Equal(t, revisions, helmRevisions(t, env, ns, "redis"), "no forced upgrade: the Helm release keeps its revision (%s)", fluxreal.Describe(hr))
	require.Equal(t, 1, hr.Status.History.Latest().Version)
	require.Empty(t, hr.Status.LastHandledForceAt)
	require.Equal(t, map[string]string{meta.ReconcileRequestAnnotation: requested}, requestAnnotations(hr))
	waitThread(t, d, root, "resolved", "the incident resolves once the template is fixed")
	requireOnly(t, d, h, "redis")
	row.Controller += fmt.Sprintf("; label removed (a new generation), controller started: release adopted, in sync, Helm revision stays %d (%q)",
		revisions, fluxreal.Condition(hr, meta.ReadyCondition).Message)
	row.Syncmedic += "; after the fix: no upgrade forced, incident resolved, nothing else announced"
}

// The stuck variant beside it: the plain request was handled and the status shows that the upgrade itself failed
// for the current generation (lastAttemptedGeneration, lastAttemptedReleaseAction, Released=False UpgradeFailed),
// the one failure a forced reconcile can help with. syncmedic on auto escalates to forceAt (= requestedAt, as
// `flux reconcile hr --force`), and the real controller handles it, upgrades and rewrites the status.
func TestStaleStatusWhoseUpgradeFailedIsForced(t *testing.T) {
	for _, h := range helmControllers {
		t.Run(h.Version, func(t *testing.T) {
			env := testenv.KubePrivate(t)
			t.Parallel()
			// hand-written state: the pre-v2beta2 status and the failed upgrade (see staleUpgradeFailedForced).
			staleUpgradeFailedForced(t, env, h)
		})
	}
}

func staleUpgradeFailedForced(t *testing.T, env *testenv.Env, h fluxreal.HelmController) {
	row := &conformance.Row{Version: "helm-controller " + h.Version, Scenario: "safety: stale status (hand-written) whose upgrade failed (hand-written), the stuck variant"}
	defer record(t, row)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: h})

	// hand-written state: the status helm-controller <= v0.36 wrote, which no controller here can write (v0.36.x does
	// not download; v0.37.2 already writes the v2beta2 status): see ScenarioPreV2beta2Status.
	old := stack.ScenarioPreV2beta2Status(t, ns, repo, "redis")
	require.Equal(t, 1, helmRevisions(t, env, ns, "redis"))
	row.Controller = fmt.Sprintf("controller stopped; status as helm-controller ≤ v0.36 wrote it, chart version changed (%s)", fluxreal.Describe(old))
	row.Syncmedic = "no finding"
	d := startServe(t, stack, ns, autoPolicy, "--dependency-not-ready-threshold", "5s", "--stale-status-threshold", staleThreshold)

	root := announcedStale(t, d, "redis")
	var requested string
	require.Eventually(t, func() bool {
		requested = requestAnnotations(stack.Get(t, ns, "redis"))[meta.ReconcileRequestAnnotation]
		return requested != ""
	}, 30*time.Second, 200*time.Millisecond, "auto: the plain reconcile request is written")

	// hand-written state: the request handled and the upgrade recorded as failed with Ready left stale; the real
	// controllers rewrite Ready when their upgrade fails (so the stale-status rule no longer matches), and none that
	// writes the pre-v2beta2 status downloads: only a hand-written status reaches the escalation.
	upgradeFailed(t, stack, ns, "redis")
	var forced string
	require.Eventually(t, func() bool {
		ann := requestAnnotations(stack.Get(t, ns, "redis"))
		forced = ann[helmv2.ForceRequestAnnotation]
		return forced != "" && ann[meta.ReconcileRequestAnnotation] == forced
	}, 30*time.Second, 200*time.Millisecond, "auto: the escalation to forceAt = requestedAt, as flux reconcile hr --force")
	require.NotEqual(t, requested, forced, "a new request token")
	row.Syncmedic = "flux/helmrelease-stale-status announced; auto: requestedAt written, then (handled, upgrade failed) forceAt = requestedAt"

	require.NoError(t, stack.StartHelmController(h))
	hr := stack.WaitFor(t, ns, "redis", 90*time.Second, "the forced request handled and the release upgraded", func(hr *helmv2.HelmRelease) bool {
		return fluxreal.IsReady(hr) && hr.Status.LastHandledForceAt == forced && hr.Status.ObservedGeneration == hr.Generation
	})
	require.Equal(t, 2, helmRevisions(t, env, ns, "redis"), "the upgrade ran: %s", fluxreal.Describe(hr))
	waitThread(t, d, root, "resolved", "the incident resolves")
	requireOnly(t, d, h, "redis")
	row.Controller += fmt.Sprintf("; request handled with Released=False UpgradeFailed written by hand; %s started: lastHandledForceAt = forceAt, upgraded to Helm revision 2 (%q)",
		h.Version, fluxreal.Condition(hr, meta.ReadyCondition).Message)
	row.Syncmedic += "; handled by helm-controller, incident resolved, nothing else announced"
}

// announcedStale waits for flux/helmrelease-stale-status about name on Slack and returns the announcement.
func announcedStale(t *testing.T, d *daemon, name string) slackPost {
	t.Helper()
	root := announcedOnce(t, d.slack, syncmedic.RuleHelmReleaseStaleStatus, name, 60*time.Second, "flux/helmrelease-stale-status announced")
	return root
}

// waitThread waits for a reply to or update of root containing sub (case-insensitive) and returns its text.
func waitThread(t *testing.T, d *daemon, root slackPost, sub, what string) string {
	t.Helper()
	var text string
	require.Eventually(t, func() bool {
		for _, p := range d.slack.thread(root.TS) {
			if strings.Contains(strings.ToLower(p.Text), strings.ToLower(sub)) {
				text = p.Text
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, what)
	return text
}

// requireOnly asserts that serve announced flux/helmrelease-stale-status on HelmRelease name once and nothing else
// — but, on v0.37.2, whose CRD stores v2beta2, flux/deprecated-stored-version on the HelmRelease CRD.
func requireOnly(t *testing.T, d *daemon, h fluxreal.HelmController, name string) {
	t.Helper()
	require.Len(t, d.slack.roots(string(syncmedic.RuleHelmReleaseStaleStatus), name), 1)
	want := 1
	if h == fluxreal.HelmControllerV037 {
		require.Len(t, d.slack.roots(string(syncmedic.RuleDeprecatedStoredVersion), "helmreleases.helm.toolkit.fluxcd.io"), 1)
		want++
	}
	require.Len(t, d.slack.roots(), want, "nothing else is announced")
}

// evaluatedWith counts serve's evaluations of HelmRelease ns/name since log offset from, requiring at least one and
// that each found findings findings.
func evaluatedWith(t *testing.T, d *daemon, ns, name string, from, findings int) int {
	t.Helper()
	line := regexp.MustCompile(`msg="evaluated HelmRelease" (?:[^\n]* )?subject=` + regexp.QuoteMeta("flux/"+ns+"/"+name) + ` findings=(\d+)`)
	evals := line.FindAllStringSubmatch(d.logs.String()[from:], -1)
	require.NotEmpty(t, evals, "serve evaluated HelmRelease %s/%s during the window", ns, name)
	for _, e := range evals {
		require.Equal(t, fmt.Sprint(findings), e[1], "findings on HelmRelease %s/%s", ns, name)
	}
	return len(evals)
}

// helmRevisions counts the Helm release's revisions: its storage Secrets (owner=helm, name=release) in ns.
func helmRevisions(t *testing.T, env *testenv.Env, ns, release string) int {
	t.Helper()
	var list corev1.SecretList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release}))
	return len(list.Items)
}

// upgradeFailed plays a helm-controller that handled the current request and whose upgrade failed for the current
// generation, with Ready left as the old controller wrote it (see the caller's hand-written state comment).
func upgradeFailed(t *testing.T, stack *fluxreal.Stack, ns, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(stack.Helm.APIVersion)
	u.SetKind(helmv2.HelmReleaseKind)
	require.NoError(t, stack.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u))
	status, _ := u.Object["status"].(map[string]any)
	status["lastHandledReconcileAt"] = u.GetAnnotations()[meta.ReconcileRequestAnnotation]
	status["lastAttemptedGeneration"] = u.GetGeneration()
	status["lastAttemptedReleaseAction"] = string(helmv2.ReleaseActionUpgrade)
	conds, _ := status["conditions"].([]any)
	var kept []any
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] != helmv2.ReleasedCondition {
			kept = append(kept, c)
		}
	}
	status["conditions"] = append(kept, map[string]any{"type": helmv2.ReleasedCondition, "status": string(metav1.ConditionFalse),
		"reason": helmv2.UpgradeFailedReason, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		"message": fmt.Sprintf("Helm upgrade failed for release %s/%s with chart %s@1.0.1: context deadline exceeded", ns, name, name)})
	// hand-written state: see the caller (the real controllers rewrite Ready when their upgrade fails).
	require.NoError(t, stack.Env.Client.Status().Update(context.Background(), u))
}
