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
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/policy"
	"github.com/syncmedic/syncmedic/remedy"
)

// startPipeline runs the watcher into a tracker whose remediation stage applies the flux remedies as policyYAML
// allows, the way serve wires them.
func startPipeline(t *testing.T, env *testenv.Env, ns, policyYAML string) (*flux.Watcher, *incident.Tracker) {
	t.Helper()
	pol, err := policy.LoadPolicy([]byte(policyYAML))
	require.NoError(t, err)
	stage := remedy.NewRemediationStage(remedy.RemediationOptions{Remediers: flux.NewReconcileRequester(env.Client).Remediers(), Identity: "e2e"})
	tracker, err := incident.NewTracker(context.Background(), incident.TrackerOptions{Policy: func() *policy.Policy { return pol }, Remediation: stage})
	require.NoError(t, err)
	w, err := flux.NewWatcher(flux.WatcherOptions{Config: env.Config, Namespaces: []string{ns}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, tracker) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return w, tracker
}

func TestPipelineInDryRunChangesNothing(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	// hand-written state: see scenarioStaleStatus (a pre-v2beta2 status no downloadable helm-controller writes).
	hr := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))
	_, tracker := startPipeline(t, env, ns, "resolveAfter: 3\n") // the default: notify every rule, act on none

	var inc incident.Incident
	require.Eventually(t, func() bool {
		for _, i := range tracker.Incidents() {
			if i.Finding.Rule == syncmedic.RuleHelmReleaseStaleStatus && i.Finding.Object.Namespace == ns && len(i.Attempts) > 0 {
				inc = i
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, incident.ResultDryRun, inc.Attempts[0].Result)
	require.Contains(t, inc.Attempts[0].Steps[0], "would PATCH")
	require.Empty(t, reconcileAnnotations(t, env, hr))
}

func TestPipelineWithRemediesAllowedWritesTheFluxCLIRequestsOnce(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	// hand-written state: see scenarioStaleStatus (a pre-v2beta2 status no downloadable helm-controller writes).
	hr := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))
	w, _ := startPipeline(t, env, ns, `
rules:
  flux/helmrelease-stale-status:
    mode: auto
    rateLimit: {max: 20, window: 1h, backoff: 50ms, maxBackoff: 1s}
`)
	subject := flux.ReleaseSubject(ns, hr.Name)

	var first string
	require.Eventually(t, func() bool {
		got := reconcileAnnotations(t, env, hr)
		first = got[meta.ReconcileRequestAnnotation]
		return len(got) == 1 && first != ""
	}, 30*time.Second, 20*time.Millisecond, "the plain request, like flux reconcile hr")
	_, err := time.Parse(time.RFC3339Nano, first)
	require.NoError(t, err)

	// Re-evaluations while helm-controller has not handled the request must not write another one.
	for i := 0; i < 5; i++ {
		w.Trigger(subject)
	}
	require.Never(t, func() bool {
		return reconcileAnnotations(t, env, hr)[meta.ReconcileRequestAnnotation] != first
	}, 2*time.Second, 100*time.Millisecond, "a second request while the first is unhandled")

	// hand-written state: see handleRequest and failReleaseStep (a request handled with the status left stale and
	// the upgrade recorded as failed, which the real helm-controller never leaves).
	failReleaseStep(t, env, hr)
	// hand-written state: see handleRequest (lastHandledReconcileAt written as helm-controller would, at a chosen instant).
	handleRequest(t, env, hr) // helm-controller handled it, its upgrade failed, and the status stays stale
	var got map[string]string
	require.Eventually(t, func() bool {
		w.Trigger(subject) // the periodic re-evaluation
		got = reconcileAnnotations(t, env, hr)
		return got[helmv2.ForceRequestAnnotation] != ""
	}, 30*time.Second, 100*time.Millisecond, "escalation to a forced request, like flux reconcile hr --force")
	require.Len(t, got, 2)
	require.Equal(t, got[meta.ReconcileRequestAnnotation], got[helmv2.ForceRequestAnnotation])
	require.NotEqual(t, first, got[meta.ReconcileRequestAnnotation])
}

// TestPipelineDoesNotForceAReleaseThatFailedBeforeTheReleaseStep: a handled plain request that leaves the status
// stale without any sign of a failed install or upgrade (a broken HelmChart template, an access or apply error) is
// not escalated to forceAt, which could not fix it and would later force an upgrade of an in-sync release; the
// incident says why, for a person.
func TestPipelineDoesNotForceAReleaseThatFailedBeforeTheReleaseStep(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	// hand-written state: see scenarioStaleStatus (a pre-v2beta2 status no downloadable helm-controller writes).
	hr := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))
	w, tracker := startPipeline(t, env, ns, `
rules:
  flux/helmrelease-stale-status:
    mode: auto
    rateLimit: {max: 20, window: 1h, backoff: 50ms, maxBackoff: 1s}
`)
	subject := flux.ReleaseSubject(ns, hr.Name)
	require.Eventually(t, func() bool { return reconcileAnnotations(t, env, hr)[meta.ReconcileRequestAnnotation] != "" },
		30*time.Second, 20*time.Millisecond, "the plain request, like flux reconcile hr")
	first := reconcileAnnotations(t, env, hr)

	// hand-written state: see handleRequest (handled, failing before the release step: no condition changes).
	handleRequest(t, env, hr)
	var failed incident.Attempt
	require.Eventually(t, func() bool {
		w.Trigger(subject)
		for _, inc := range tracker.Incidents() {
			if inc.Finding.Rule != syncmedic.RuleHelmReleaseStaleStatus || inc.Finding.Object.Namespace != ns || inc.Finding.Object.Name != hr.Name {
				continue
			}
			if last := inc.LastAttempt(); last != nil && last.Result == incident.ResultFailed {
				failed = *last
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the incident records why it is not forced")
	require.True(t, failed.Permanent)
	require.Contains(t, failed.Error, "helm-controller stopped before the release step")
	require.Never(t, func() bool {
		w.Trigger(subject)
		return reconcileAnnotations(t, env, hr)[helmv2.ForceRequestAnnotation] != ""
	}, 2*time.Second, 100*time.Millisecond, "no forceAt")
	require.Equal(t, first, reconcileAnnotations(t, env, hr))
}
