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

// A Flux 2.2 → 2.7 upgrade on its own apiserver (the CRD swap is cluster-wide): a release installed by
// helm-controller v0.37.2 with its own CRDs (v2beta2 storage), then the CRDs and controller replaced by v1.4.3's and
// the release's chart version changed. The test records what the new controller does with the status the old one
// wrote — whether it stays stale, for how long, whether observedGeneration moves — and what syncmedic reports on it.
func TestFluxUpgradeFromV037InheritsTheOldStatus(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	row := &conformance.Row{Version: "helm-controller v0.37.2 → v1.4.3", Scenario: "status written by the old controller, then CRDs, controller and spec upgraded"}
	defer record(t, row)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV037})

	sc := stack.ScenarioControllerUpgrade(t, ns, repo, "legacy", 90*time.Second)
	oldReady := fluxreal.Condition(sc.Old, meta.ReadyCondition)
	row.Controller = fmt.Sprintf("v0.37.2 wrote Ready %q, history %d entries; after the upgrade, before the spec change: %s; after the spec change: ",
		oldReady.Message, len(sc.Old.Status.History), changedBy(sc.Rewritten, sc.Inherited))
	if sc.Caught != nil {
		row.Controller += fmt.Sprintf("observedGeneration %d → %d (= generation), which took %s; Ready %q; CRD storedVersions %v",
			sc.Changed.Status.ObservedGeneration, sc.Caught.Status.ObservedGeneration, sc.CaughtAfter.Round(time.Second),
			fluxreal.Condition(sc.Caught, meta.ReadyCondition).Message, sc.StoredVersions)
	} else {
		row.Controller += fmt.Sprintf("stayed stale for 90s+: %s; CRD storedVersions %v", fluxreal.Describe(stack.Get(t, ns, "legacy")), sc.StoredVersions)
	}
	require.NotNil(t, oldReady)
	require.NotEmpty(t, sc.Old.Status.History, "helm-controller v0.37.2 (v2beta2) already writes status.history")
	require.NotNil(t, sc.Caught, "v1.4.3 reconciles the changed spec: observedGeneration reaches the generation (%s)", fluxreal.Describe(stack.Get(t, ns, "legacy")))
	require.True(t, fluxreal.IsReady(sc.Caught), "v1.4.3 upgrades the release: %s", fluxreal.Describe(sc.Caught))
	require.Contains(t, sc.StoredVersions, "v2beta2", "the CRD still lists v2beta2 among its stored versions after the upgrade")

	d := startServe(t, stack, ns, autoPolicy, "--dependency-not-ready-threshold", "5s", "--stale-status-threshold", staleThreshold)
	require.Eventually(t, func() bool { return len(d.slack.roots(string(syncmedic.RuleDeprecatedStoredVersion))) == 1 },
		60*time.Second, 200*time.Millisecond, "the CRD still storing v2beta2 is announced")
	require.Never(t, func() bool { return len(d.slack.roots()) > 1 },
		quiet, 500*time.Millisecond, "an incident besides the stored version (stale-status on a release the new controller rewrote?)")
	root := d.slack.roots()[0]
	require.Contains(t, root.Blocks, "helmreleases.helm.toolkit.fluxcd.io", "the incident is about the HelmRelease CRD")
	require.Empty(t, d.slack.roots(string(syncmedic.RuleHelmReleaseStaleStatus)))
	evaluated := d.lookedAt(t, ns, "legacy", 0)
	row.Syncmedic = fmt.Sprintf("[%s] announced on the HelmRelease CRD (notify only), nothing else within %s; no %s on the release (evaluated %d times, nothing found): v0.37.2 already writes the v2beta2 status (history, new message format), which v1.4.3 reads and rewrites",
		syncmedic.RuleDeprecatedStoredVersion, quiet, syncmedic.RuleHelmReleaseStaleStatus, evaluated)
}

func changedBy(rewritten bool, hr *helmv2.HelmRelease) string {
	if !rewritten {
		return "v1.4.3 left the status as it was for 15s (" + fluxreal.Describe(hr) + ")"
	}
	return "v1.4.3 rewrote it at start (" + fluxreal.Describe(hr) + ")"
}

// A release whose status a v2beta1-era controller wrote (hand-written: helm-controller ≤ v0.36 does not download,
// see fluxreal.ScenarioPreV2beta2Status) and whose spec changed while no controller ran. syncmedic announces
// flux/helmrelease-stale-status and, under an auto policy, writes requestedAt; when helm-controller v1.4.3 starts it
// handles the request (status.lastHandledReconcileAt equals it), upgrades the release and rewrites the status, and
// the incident resolves without an escalation to forceAt.
func TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	row := &conformance.Row{Version: "helm-controller v1.4.3", Scenario: "pre-v2beta2 status (v2beta1-era, hand-written) inherited with a spec change"}
	defer record(t, row)
	stack, ns, repo := setupPrivate(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV1})

	// hand-written state: the status helm-controller <= v0.36 wrote, which no controller here can write (v0.36.x does not download; v0.37.2 already writes the v2beta2 status): see ScenarioPreV2beta2Status.
	old := stack.ScenarioPreV2beta2Status(t, ns, repo, "redis")
	row.Controller = fmt.Sprintf("controller stopped; status as helm-controller ≤ v0.36 wrote it (%s)", fluxreal.Describe(old))
	row.Syncmedic = "no finding"
	d := startServe(t, stack, ns, autoPolicy, "--dependency-not-ready-threshold", "5s", "--stale-status-threshold", staleThreshold)

	root := announcedOnce(t, d.slack, syncmedic.RuleHelmReleaseStaleStatus, "redis", 60*time.Second, "flux/helmrelease-stale-status announced")
	var requested string
	require.Eventually(t, func() bool {
		requested = requestAnnotations(stack.Get(t, ns, "redis"))[meta.ReconcileRequestAnnotation]
		return requested != ""
	}, 30*time.Second, 200*time.Millisecond, "auto: the plain reconcile request is written")
	row.Syncmedic = "flux/helmrelease-stale-status announced; auto: requestedAt written"

	start := time.Now()
	require.NoError(t, stack.StartHelmController(fluxreal.HelmControllerV1))
	hr := stack.WaitFor(t, ns, "redis", 90*time.Second, "rewritten at the new generation", func(hr *helmv2.HelmRelease) bool {
		return fluxreal.IsReady(hr) && len(hr.Status.History) > 0 && hr.Status.LastHandledReconcileAt != ""
	})
	took := time.Since(start).Round(time.Second)
	require.Equal(t, requested, hr.Status.LastHandledReconcileAt, "helm-controller handled syncmedic's request")
	require.Empty(t, requestAnnotations(hr)[helmv2.ForceRequestAnnotation], "no escalation: the plain request was enough")
	require.Eventually(t, func() bool {
		for _, p := range d.slack.thread(root.TS) {
			if strings.Contains(strings.ToLower(p.Text), "resolved") {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the incident resolves")
	row.Controller += fmt.Sprintf("; v1.4.3 started and took %s to reach observedGeneration %d, Ready %q, history %d entries, lastHandledReconcileAt = syncmedic's requestedAt",
		took, hr.Status.ObservedGeneration, fluxreal.Condition(hr, meta.ReadyCondition).Message, len(hr.Status.History))
	row.Syncmedic += "; handled by helm-controller (lastHandledReconcileAt), status rewritten, incident resolved, no forceAt needed"
}
