package flux_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// reconcileAnnotations returns the reconcile.fluxcd.io annotations of the live release.
func reconcileAnnotations(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease) map[string]string {
	t.Helper()
	live := &helmv2.HelmRelease{}
	require.NoError(t, env.Client.Get(context.Background(), keyOf(hr), live))
	out := map[string]string{}
	for _, k := range []string{meta.ReconcileRequestAnnotation, helmv2.ForceRequestAnnotation, helmv2.ResetRequestAnnotation} {
		if v, ok := live.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// handleRequest plays a helm-controller that handles a request without rewriting the status: it records the
// current request as handled and leaves the rest. The real helm-controller v1.4.3 never leaves a stale status behind
// once it handles a request (internal/conformance/flux TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest:
// it upgrades the release and rewrites the status within seconds), and the v2beta1-era controllers that wrote such a
// status (helm-controller ≤ v0.36) do not download here; so only a hand-written status reaches the escalation to
// forceAt tested below.
//
// hand-written state: status.lastHandledReconcileAt (and ForceAt, ResetAt) set with the rest of the status left
// stale, for the reason above.
func handleRequest(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease) {
	t.Helper()
	setStatus(t, env, hr, func(live *helmv2.HelmRelease) {
		live.Status.LastHandledReconcileAt = live.Annotations[meta.ReconcileRequestAnnotation]
		if v, ok := live.Annotations[helmv2.ForceRequestAnnotation]; ok {
			live.Status.LastHandledForceAt = v
		}
		if v, ok := live.Annotations[helmv2.ResetRequestAnnotation]; ok {
			live.Status.LastHandledResetAt = v
		}
	})
}

// failReleaseStep plays a helm-controller whose upgrade failed for the current generation: what its release step
// records (status.lastAttemptedGeneration, status.lastAttemptedReleaseAction, Released=False UpgradeFailed), with
// Ready left as the old controller wrote it, so the status is still stale.
//
// hand-written state: the real v1.4.3 also rewrites Ready when its upgrade fails (so the stale-status rule no longer
// matches) and no downloadable helm-controller writes the pre-v2beta2 status; only a hand-written status reaches the
// escalation to forceAt.
func failReleaseStep(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease) {
	t.Helper()
	setStatus(t, env, hr, func(live *helmv2.HelmRelease) {
		live.Status.LastAttemptedGeneration = live.Generation
		live.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionUpgrade
		live.Status.Conditions = append(live.Status.Conditions, condition(helmv2.ReleasedCondition, "False", helmv2.UpgradeFailedReason,
			"Helm upgrade failed for release "+live.Namespace+"/"+live.Name+" with chart redis@1.0.1: context deadline exceeded", time.Now()))
	})
}

func findingFor(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease, rule syncmedic.RuleID) syncmedic.Finding {
	t.Helper()
	live := &helmv2.HelmRelease{}
	require.NoError(t, env.Client.Get(context.Background(), keyOf(hr), live))
	for _, f := range flux.EvaluateRelease(flux.ReleaseObservation{Release: live}, time.Now(), flux.DefaultThresholds()) {
		if f.Rule == rule {
			return f
		}
	}
	t.Fatalf("no %s finding for %s", rule, keyOf(hr))
	return syncmedic.Finding{}
}

func TestReconcileRequestsAreWrittenLikeTheFluxCLI(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	clock := time.Now().UTC()
	r := flux.NewReconcileRequester(env.Client)
	r.Now = func() time.Time { return clock }
	ts := clock.Format(time.RFC3339Nano)

	// hand-written state: see scenarioStaleStatus (a pre-v2beta2 status no downloadable helm-controller writes).
	hr := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))
	f := findingFor(t, env, hr, syncmedic.RuleHelmReleaseStaleStatus)

	t.Run("dry-run returns the patch and changes nothing", func(t *testing.T) {
		out, err := r.Remediate(ctx, f, true)
		require.NoError(t, err)
		require.True(t, out.DryRun)
		require.False(t, out.Changed)
		require.Len(t, out.Steps, 1)
		require.Contains(t, out.Steps[0], `"reconcile.fluxcd.io/requestedAt":"`+ts+`"`)
		require.Empty(t, reconcileAnnotations(t, env, hr))
	})

	t.Run("a write the policy refuses right before it is sent (the stage's gate) is not sent", func(t *testing.T) {
		gated := syncmedic.WithWriteGate(ctx, func(context.Context, string) string {
			return "the kill switch is on: syncmedic takes no action (dry-run)"
		})
		out, err := r.Remediate(gated, f, false)
		refusal, ok := syncmedic.IsWriteRefused(err)
		require.True(t, ok, "%v", err)
		require.Contains(t, refusal.Write, "PATCH helmreleases.helm.toolkit.fluxcd.io "+ns+"/redis (merge patch)")
		require.False(t, out.Changed)
		require.Empty(t, reconcileAnnotations(t, env, hr))
	})

	t.Run("the first remedy writes requestedAt only, like flux reconcile hr", func(t *testing.T) {
		out, err := r.Remediate(ctx, f, false)
		require.NoError(t, err)
		require.True(t, out.Changed)
		require.Equal(t, syncmedic.ActionFluxReconcile, out.Action)
		require.Equal(t, map[string]string{meta.ReconcileRequestAnnotation: ts}, reconcileAnnotations(t, env, hr))
	})

	t.Run("while the request is unhandled no new request is written", func(t *testing.T) {
		clock = clock.Add(time.Minute)
		out, err := r.Remediate(ctx, f, false)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Contains(t, out.Steps[0], "not handled yet")
		require.Equal(t, map[string]string{meta.ReconcileRequestAnnotation: ts}, reconcileAnnotations(t, env, hr))
	})

	t.Run("once handled with the status still stale but no sign that the release step failed, it is not forced", func(t *testing.T) {
		// hand-written state: see handleRequest (the request handled, failing before the release step as a broken
		// HelmChart template does, which leaves every condition as it was).
		handleRequest(t, env, hr)
		clock = clock.Add(time.Minute)
		before := reconcileAnnotations(t, env, hr)
		_, err := r.Remediate(ctx, f, false)
		require.ErrorIs(t, err, flux.ErrRequestUnsuccessful)
		require.True(t, syncmedic.IsPermanent(err))
		require.Contains(t, err.Error(), "helm-controller stopped before the release step")
		require.Contains(t, err.Error(), "Ready: True (reason ReconciliationSucceeded)")
		require.Equal(t, before, reconcileAnnotations(t, env, hr), "no forceAt")
	})

	t.Run("once the release step is recorded as failed it escalates to forceAt equal to requestedAt", func(t *testing.T) {
		// hand-written state: see failReleaseStep.
		failReleaseStep(t, env, hr)
		clock = clock.Add(time.Minute)
		ts2 := clock.Format(time.RFC3339Nano)
		out, err := r.Remediate(ctx, f, false)
		require.NoError(t, err)
		require.True(t, out.Changed)
		require.Equal(t, syncmedic.ActionFluxForceReconcile, out.Action)
		require.Equal(t, map[string]string{meta.ReconcileRequestAnnotation: ts2, helmv2.ForceRequestAnnotation: ts2}, reconcileAnnotations(t, env, hr))

		out, err = r.Remediate(ctx, f, false)
		require.NoError(t, err)
		require.False(t, out.Changed, "the forced request is pending: written once")
	})

	t.Run("a handled forced request that did not help is left to a person", func(t *testing.T) {
		// hand-written state: see handleRequest.
		handleRequest(t, env, hr)
		before := reconcileAnnotations(t, env, hr)
		_, err := r.Remediate(ctx, f, false)
		require.ErrorIs(t, err, flux.ErrRequestUnsuccessful)
		require.True(t, syncmedic.IsPermanent(err))
		require.Equal(t, before, reconcileAnnotations(t, env, hr))
	})

	t.Run("a release whose status was rewritten needs nothing", func(t *testing.T) {
		// hand-written state: the stale status caught up with the generation, nothing else changed. A real
		// controller rewrites the whole status when it does this (internal/conformance/flux
		// TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest); here only observedGeneration is
		// the point, and there is no helm-controller.
		setStatus(t, env, hr, func(live *helmv2.HelmRelease) { live.Status.ObservedGeneration = live.Generation })
		before := reconcileAnnotations(t, env, hr)
		out, err := r.Remediate(ctx, f, false)
		require.NoError(t, err)
		require.False(t, out.Changed)
		require.Equal(t, before, reconcileAnnotations(t, env, hr))
	})
}

func TestResetRequestIsWrittenLikeFluxReconcileReset(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	// hand-written state: see scenarioRetriesExhausted (real in TestRetriesExhaustedIsAnnouncedAndFixResetsTheRealRelease).
	hr := scenarioRetriesExhausted(t, env, ns, "cache")
	f := findingFor(t, env, hr, syncmedic.RuleRetriesExhausted)
	r := flux.NewReconcileRequester(env.Client)

	out, err := r.Remediate(ctx, f, true)
	require.NoError(t, err)
	require.False(t, out.Changed)
	require.Empty(t, reconcileAnnotations(t, env, hr), "dry-run changes nothing")

	out, err = r.Remediate(ctx, f, false)
	require.NoError(t, err)
	require.True(t, out.Changed)
	require.Equal(t, syncmedic.ActionFluxResetReconcile, out.Action)
	got := reconcileAnnotations(t, env, hr)
	require.Len(t, got, 2)
	require.NotEmpty(t, got[meta.ReconcileRequestAnnotation])
	require.Equal(t, got[meta.ReconcileRequestAnnotation], got[helmv2.ResetRequestAnnotation])
	_, err = time.Parse(time.RFC3339Nano, got[meta.ReconcileRequestAnnotation])
	require.NoError(t, err)

	out, err = r.Remediate(ctx, f, false)
	require.NoError(t, err)
	require.False(t, out.Changed, "written once while unhandled")
	require.Equal(t, got, reconcileAnnotations(t, env, hr))
}
