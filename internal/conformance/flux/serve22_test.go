package flux_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// On Flux 2.2 — helm-controller v0.37.2 with the CRDs of its own module, which serve v2beta2 and v2beta1 and no v2 —
// syncmedic serve watches HelmReleases through v2beta2 and announces what the real controller leaves stuck: a chart
// whose install retries ran out (flux/retries-exhausted, on the release and on a failing dependency), and, once that
// dependency is fixed, its dependent still saying DependencyNotReady (flux/dependency-not-ready-false, whose
// requestedAt syncmedic writes through v2beta2 and the real controller handles). A healthy release beside them is
// read and evaluated, and announced nowhere.
func TestFlux22ServeWatchesV2beta2AndAnnouncesWhatIsStuck(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	// --requeue-dependency wide open: helm-controller's own re-check of the dependent cannot come before syncmedic's
	// 5s threshold once the dependency is fixed (see TestDependencyNotReadyTakesTheWholeFluxPath).
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV037, Notifications: true, RequeueDependency: requeueDependencyWide})
	d := startServe(t, stack, ns, autoPolicy, smallThresholds...)
	version := "helm-controller " + fluxreal.HelmControllerV037.Version
	require.Contains(t, d.logs.String(), "apiVersion=helm.toolkit.fluxcd.io/v2beta2", "serve watches the version Flux 2.2 serves")

	healthy := &conformance.Row{Version: version, Scenario: "near miss: healthy release"}
	defer record(t, healthy)
	frontend := stack.Installed(t, ns, repo, fluxreal.Release{Name: "frontend"})
	healthy.Controller = fmt.Sprintf("Ready=True %q", fluxreal.Condition(frontend, meta.ReadyCondition).Message)
	healthy.Syncmedic = "not checked (the test stopped before)"

	retries := &conformance.Row{Version: version, Scenario: "retries exhausted (install fails 3 times)"}
	defer record(t, retries)
	sc := stack.ScenarioRetriesExhausted(t, ns, repo, "cache", 2)
	stalled := fluxreal.Condition(sc.Release, meta.StalledCondition)
	retries.Controller = fmt.Sprintf("Stalled=True %s %q, installFailures %d", stalled.Reason, stalled.Message, sc.Release.Status.InstallFailures)
	retries.Syncmedic = "no finding"
	announcedNotReset(t, d, stack, ns, "cache")
	retries.Syncmedic = "flux/retries-exhausted announced (read through v2beta2); auto policy: not applied (not safe unattended), dry-run reply"

	dnr := &conformance.Row{Version: version, Scenario: "DependencyNotReady (dependency fails, then recovers)"}
	defer record(t, dnr)
	dep := stack.ScenarioDependencyNotReady(t, ns, repo)
	ready := fluxreal.Condition(dep.DependentRelease, meta.ReadyCondition)
	dnr.Controller = fmt.Sprintf("dependent Ready=False %s %q while the dependency is Stalled", ready.Reason, ready.Message)
	dnr.Syncmedic = "no finding"
	require.Eventually(t, func() bool { return len(d.slack.roots(string(syncmedic.RuleRetriesExhausted), dep.Dependency)) == 1 },
		60*time.Second, 200*time.Millisecond, "the failing dependency is announced")
	require.Never(t, func() bool { return len(d.slack.roots(string(syncmedic.RuleDependencyNotReadyFalse))) > 0 },
		quiet, 500*time.Millisecond, "dependency-not-ready-false fired while the dependency really is not ready")
	require.Eventually(t, func() bool {
		return strings.Contains(d.logs.String(), fmt.Sprintf("kind=HelmRelease namespace=%s name=%s reason=%s", ns, dep.Dependent, helmv2.DependencyNotReadyReason))
	}, 60*time.Second, 200*time.Millisecond, "v0.37.2's events reach the receiver through notification-controller")
	dnr.Syncmedic = "no finding while the dependency failed (flux/retries-exhausted on the dependency instead)"

	dnr.Syncmedic += fmt.Sprintf(" (the dependent evaluated %d times, nothing found)", d.lookedAt(t, ns, dep.Dependent, 0))

	fluxreal.CreateNamespace(t, stack.Env, dep.MissingNamespace)
	resetByHand(t, stack, ns, dep.Dependency)
	stack.WaitFor(t, ns, dep.Dependency, 90*time.Second, "Ready after the reset", fluxreal.IsReady)
	depReady := time.Now()
	hr := stack.WaitFor(t, ns, dep.Dependent, 100*time.Second, "Ready", fluxreal.IsReady)
	followed := time.Since(depReady).Round(time.Second)
	checkHealthy(t, d, healthy, ns, frontend.Name)
	require.NotEmpty(t, requestAnnotations(hr)[meta.ReconcileRequestAnnotation],
		"syncmedic wrote requestedAt through v2beta2: flux/dependency-not-ready-false fired within %s of the dependency turning Ready (helm-controller re-checks only every %s here)", followed, requeueDependencyWide)
	hr = stack.WaitFor(t, ns, dep.Dependent, 30*time.Second, "with syncmedic's request handled", handled)
	require.Len(t, d.slack.roots(string(syncmedic.RuleDependencyNotReadyFalse), dep.Dependent), 1, "the finding behind the remedy is announced")
	require.Len(t, d.slack.roots(string(syncmedic.RuleRetriesExhausted), "cache"), 1)
	require.Len(t, d.slack.roots(string(syncmedic.RuleRetriesExhausted), dep.Dependency), 1)
	require.Len(t, d.slack.roots(string(syncmedic.RuleDeprecatedStoredVersion), "helmreleases.helm.toolkit.fluxcd.io"), 1,
		"Flux 2.2's CRD stores v2beta2: announced once")
	require.Equal(t, 4, len(d.slack.roots()), "nothing else is announced: the CRD's stored version, retries-exhausted on cache and on the dependency, dependency-not-ready-false on the dependent")
	require.Positive(t, d.metric(t, "syncmedic_events_received_total", `result="accepted"`))
	dnr.Controller += fmt.Sprintf("; after the dependency turned Ready the dependent stays DependencyNotReady until its next dependency check (--requeue-dependency, set to %s here; 30s by default); it became Ready %s later, on syncmedic's request", requeueDependencyWide, followed)
	dnr.Syncmedic += fmt.Sprintf("; with a 5s threshold: flux/dependency-not-ready-false once the dependency had been Ready 5s, auto: requestedAt written through v2beta2, handled by helm-controller (lastHandledReconcileAt %s), dependent Ready; event path helm-controller → notification-controller (generic-hmac) → receiver checked",
		map[bool]string{true: "= requestedAt", false: "≠ requestedAt"}[handled(hr)])
}

// checkHealthy asserts that serve read and evaluated the healthy release (so its silence is a judgement, not a
// release it never saw) and announced nothing about it.
func checkHealthy(t *testing.T, d *daemon, row *conformance.Row, ns, name string) {
	t.Helper()
	require.Contains(t, d.logs.String(), fmt.Sprintf("subject=flux/%s/%s findings=0", ns, name), "serve evaluated the healthy release")
	require.Empty(t, d.slack.roots(name), "an incident about a healthy release")
	row.Syncmedic = "no finding (the release was read through v2beta2 and evaluated)"
}
