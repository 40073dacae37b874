package flux_test

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/flux"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func keyOf(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

func startWatcher(t *testing.T, env *testenv.Env, th flux.Thresholds, namespaces ...string) (*flux.Watcher, *collectingSink) {
	t.Helper()
	w, err := flux.NewWatcher(flux.WatcherOptions{Config: env.Config, Namespaces: namespaces, Thresholds: th})
	require.NoError(t, err)
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return w.Ready() == nil }, 30*time.Second, 20*time.Millisecond)
	return w, sink
}

func TestWatcherDetectsEachFluxScenarioOnTheAPIServer(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	// hand-written state: see scenarioStaleStatus, scenarioDependencyNotReady and scenarioRetriesExhausted — the
	// three seed states on an apiserver with no helm-controller, two of them held for hours.
	stale := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))
	// hand-written state: see scenarioDependencyNotReady (held an hour).
	api, postgres := scenarioDependencyNotReady(t, env, ns, time.Now().Add(-time.Hour))
	// hand-written state: see scenarioRetriesExhausted; the real helm-controller exhausts retries in
	// internal/conformance/flux TestRetriesExhaustedIsAnnouncedAndFixResetsTheRealRelease.
	stalled := scenarioRetriesExhausted(t, env, ns, "cache")
	_, sink := startWatcher(t, env, flux.DefaultThresholds(), ns)

	tests := []struct {
		name    string
		subject string
		want    []syncmedic.RuleID
	}{
		{name: "the release with a pre-v2beta2 status is stale", subject: flux.ReleaseSubject(ns, stale.Name), want: []syncmedic.RuleID{syncmedic.RuleHelmReleaseStaleStatus}},
		{name: "the release told its Ready dependency is not ready is reported", subject: flux.ReleaseSubject(ns, api.Name), want: []syncmedic.RuleID{syncmedic.RuleDependencyNotReadyFalse}},
		{name: "the Ready dependency itself is healthy", subject: flux.ReleaseSubject(ns, postgres.Name)},
		{name: "the release whose retries are exhausted is reported", subject: flux.ReleaseSubject(ns, stalled.Name), want: []syncmedic.RuleID{syncmedic.RuleRetriesExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Eventually(t, func() bool {
				got, ok := sink.rules(tt.subject)
				return ok && equalRules(got, tt.want)
			}, 20*time.Second, 20*time.Millisecond)
		})
	}

	t.Run("a dependency that stops being Ready clears the false DependencyNotReady finding", func(t *testing.T) {
		// hand-written state: the dependency's upgrade failing, so its dependent's DependencyNotReady becomes true;
		// there is no helm-controller here (the real one fails a dependency in TestDependencyNotReadyTakesTheWholeFluxPath).
		setStatus(t, env, postgres, func(hr *helmv2.HelmRelease) {
			hr.Status.Conditions = []metav1.Condition{condition(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "upgrade failed", time.Now())}
		})
		require.Eventually(t, func() bool {
			got, ok := sink.rules(flux.ReleaseSubject(ns, api.Name))
			return ok && len(got) == 0
		}, 20*time.Second, 20*time.Millisecond)
	})

	t.Run("a deleted release is reported with no findings", func(t *testing.T) {
		require.NoError(t, env.Client.Delete(context.Background(), stalled))
		require.Eventually(t, func() bool {
			got, ok := sink.rules(flux.ReleaseSubject(ns, stalled.Name))
			return ok && len(got) == 0
		}, 20*time.Second, 20*time.Millisecond)
	})
}

func TestWatcherReportsAFindingWhenItsThresholdPassesWithoutAnyChange(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	th := flux.Thresholds{StaleStatus: time.Hour, DependencyNotReady: 3 * time.Second}
	// hand-written state: see scenarioDependencyNotReady (held unchanged past the threshold, which the real
	// controller's --requeue-dependency re-check would not allow).
	api, _ := scenarioDependencyNotReady(t, env, ns, time.Now())
	_, sink := startWatcher(t, env, th, ns)
	subject := flux.ReleaseSubject(ns, api.Name)

	require.Eventually(t, func() bool { _, ok := sink.rules(subject); return ok }, 20*time.Second, 20*time.Millisecond)
	got, _ := sink.rules(subject)
	require.Empty(t, got, "inside the threshold nothing is reported yet")
	require.Eventually(t, func() bool {
		got, _ := sink.rules(subject)
		return equalRules(got, []syncmedic.RuleID{syncmedic.RuleDependencyNotReadyFalse})
	}, 20*time.Second, 50*time.Millisecond, "the per-object timer re-evaluates the release when the threshold passes")
}

func TestWatcherTriggerReevaluatesARelease(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	hr := createRelease(t, env, ns, "quiet")
	w, sink := startWatcher(t, env, flux.DefaultThresholds(), ns)
	subject := flux.ReleaseSubject(ns, hr.Name)
	require.Eventually(t, func() bool { _, ok := sink.rules(subject); return ok }, 20*time.Second, 20*time.Millisecond)
	before := sink.evaluations(subject)
	w.Trigger(subject)
	require.Eventually(t, func() bool { return sink.evaluations(subject) > before }, 20*time.Second, 20*time.Millisecond)
}

func TestWatcherReportsAHelmReleaseCRDThatStillStoresV2beta1(t *testing.T) {
	env := testenv.Kube(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: flux.CRDName}, crd))
	original := append([]string(nil), crd.Status.StoredVersions...)
	// hand-written state: the CRD's status.storedVersions still listing v2beta1, as on a cluster that once stored
	// v2beta1 objects: this apiserver's CRD never stored one, and only a Flux < 2.2 install would. The real upgrade from
	// v0.37.2 records its storedVersions in internal/conformance/flux TestFluxUpgradeFromV037InheritsTheOldStatus.
	crd.Status.StoredVersions = []string{"v2beta1", "v2"}
	require.NoError(t, env.Client.Status().Update(ctx, crd))
	t.Cleanup(func() {
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: flux.CRDName}, crd))
		crd.Status.StoredVersions = original
		// hand-written state: the storedVersions this apiserver had before the test, put back.
		require.NoError(t, env.Client.Status().Update(ctx, crd))
	})
	_, sink := startWatcher(t, env, flux.DefaultThresholds(), env.Namespace(t))
	require.Eventually(t, func() bool {
		got, _ := sink.rules(flux.CRDSubject(flux.CRDName))
		return equalRules(got, []syncmedic.RuleID{syncmedic.RuleDeprecatedStoredVersion})
	}, 20*time.Second, 20*time.Millisecond)
}

func equalRules(got, want []syncmedic.RuleID) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestWatcherAdvisesOnTheHelmControllerVersionItFinds(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app": "helm-controller"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "helm-controller", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/fluxcd/helm-controller:v0.36.2"}}}}}}
	require.NoError(t, env.Client.Create(context.Background(), deploy))
	// hand-written state: see scenarioStaleStatus (a pre-v2beta2 status no downloadable helm-controller writes).
	stale := scenarioStaleStatus(t, env, ns, "redis", time.Now().Add(-2*time.Hour))

	w, err := flux.NewWatcher(flux.WatcherOptions{Config: env.Config, Namespaces: []string{ns},
		ControllerDeployment: types.NamespacedName{Namespace: ns, Name: "helm-controller"}})
	require.NoError(t, err)
	sink := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	var f syncmedic.Finding
	require.Eventually(t, func() bool {
		var ok bool
		f, ok = sink.finding(flux.ReleaseSubject(ns, stale.Name), syncmedic.RuleHelmReleaseStaleStatus)
		return ok
	}, 20*time.Second, 20*time.Millisecond)
	require.Len(t, f.Advisories, 1)
	require.Contains(t, f.Advisories[0], "helm-controller v0.36.2 predates v0.37.0")
}
