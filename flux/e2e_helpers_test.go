package flux_test

import (
	"context"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// collectingSink keeps the latest evaluation of every subject.
type collectingSink struct {
	mu     sync.Mutex
	latest map[string][]syncmedic.Finding
	count  map[string]int
}

func newSink() *collectingSink {
	return &collectingSink{latest: map[string][]syncmedic.Finding{}, count: map[string]int{}}
}

func (s *collectingSink) Observe(_ context.Context, subject string, fs []syncmedic.Finding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest[subject] = fs
	s.count[subject]++
}

// rules returns the rules of the latest evaluation of subject, and whether it was evaluated at all.
func (s *collectingSink) rules(subject string) ([]syncmedic.RuleID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, ok := s.latest[subject]
	var out []syncmedic.RuleID
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out, ok
}

func (s *collectingSink) evaluations(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[subject]
}

func (s *collectingSink) finding(subject string, rule syncmedic.RuleID) (syncmedic.Finding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.latest[subject] {
		if f.Rule == rule {
			return f, true
		}
	}
	return syncmedic.Finding{}, false
}

// createRelease creates a v2 HelmRelease the way a user's manifest would.
func createRelease(t *testing.T, env *testenv.Env, ns, name string, dependsOn ...string) *helmv2.HelmRelease {
	t.Helper()
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	hr.Spec.Interval = metav1.Duration{Duration: 5 * time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
		Chart: name, Version: "1.0.0", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "charts"}}}
	for _, d := range dependsOn {
		hr.Spec.DependsOn = append(hr.Spec.DependsOn, meta.NamespacedObjectReference{Name: d})
	}
	require.NoError(t, env.Client.Create(context.Background(), hr))
	return hr
}

// setStatus writes status through the status subresource, as helm-controller does.
//
// hand-written state: the flux package's end-to-end tests run a bare apiserver with Flux's CRDs and no
// helm-controller (what they prove is how the watcher, receiver and remedies read and write HelmReleases through
// the apiserver), so every status they need is written here; each caller says which and why no controller gives it.
// The real helm-controller's states are proven in internal/conformance/flux.
func setStatus(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease, mutate func(*helmv2.HelmRelease)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Get(ctx, keyOf(hr), hr))
	mutate(hr)
	// hand-written state: the helper that writes a HelmRelease's status on an apiserver with no helm-controller; its
	// callers say which status and why.
	require.NoError(t, env.Client.Status().Update(ctx, hr))
}

// bumpGeneration changes the spec so metadata.generation moves on.
func bumpGeneration(t *testing.T, env *testenv.Env, hr *helmv2.HelmRelease) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Get(ctx, keyOf(hr), hr))
	hr.Spec.Chart.Spec.Version = "1.0.1"
	require.NoError(t, env.Client.Update(ctx, hr))
}

func condition(typ, status, reason, msg string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(at)}
}

// Seed scenarios, as the incidents left them on the apiserver.

// scenarioStaleStatus: a release whose status an old (pre-v2beta2) helm-controller wrote, with a new generation
// never observed.
//
// hand-written state: the pre-v2beta2 status (no status.history, the old message) is written only by
// helm-controller ≤ v0.36, which does not download here (v0.37.2 already writes the v2beta2 status:
// internal/conformance/flux TestFluxUpgradeFromV037InheritsTheOldStatus), and Ready since readySince (hours ago).
// fluxreal.ScenarioPreV2beta2Status writes the same status on a real release for
// TestPreV2beta2StatusIsRewrittenByTheRealControllerOnSyncmedicsRequest.
func scenarioStaleStatus(t *testing.T, env *testenv.Env, ns, name string, readySince time.Time) *helmv2.HelmRelease {
	hr := createRelease(t, env, ns, name)
	bumpGeneration(t, env, hr)
	// hand-written state: see scenarioStaleStatus's doc (a pre-v2beta2 status, Ready for hours).
	setStatus(t, env, hr, func(hr *helmv2.HelmRelease) {
		hr.Status.ObservedGeneration = 1
		hr.Status.Conditions = []metav1.Condition{condition(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", readySince)}
	})
	return hr
}

// scenarioDependencyNotReady: api waits on postgres, which is Ready at its generation.
//
// hand-written state: the seed's DependencyNotReady while the dependency is Ready, held since waitingSince. The
// real helm-controller holds it only until its next --requeue-dependency re-check (internal/conformance/flux
// TestFlux22ServeWatchesV2beta2AndAnnouncesWhatIsStuck, TestDependencyNotReadyTakesTheWholeFluxPath: a dependency
// that failed, then recovered); these tests need it held past a threshold, and there is no controller here.
func scenarioDependencyNotReady(t *testing.T, env *testenv.Env, ns string, waitingSince time.Time) (api, postgres *helmv2.HelmRelease) {
	postgres = createRelease(t, env, ns, "postgres")
	setStatus(t, env, postgres, func(hr *helmv2.HelmRelease) {
		hr.Status.ObservedGeneration = hr.Generation
		hr.Status.History = helmv2.Snapshots{{Name: "postgres", Namespace: ns, Version: 3, Status: "deployed", ChartName: "postgres", ChartVersion: "1.0.0",
			FirstDeployed: metav1.NewTime(time.Now().Add(-3 * time.Hour)), LastDeployed: metav1.NewTime(time.Now().Add(-2 * time.Hour))}}
		hr.Status.Conditions = []metav1.Condition{condition(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason,
			"Helm upgrade succeeded for release "+ns+"/postgres.v3 with chart postgres@1.0.0", time.Now().Add(-2*time.Hour))}
	})
	api = createRelease(t, env, ns, "api", "postgres")
	// hand-written state: the dependent's DependencyNotReady status, held for an hour, on an apiserver with no
	// helm-controller; the real one reaches it in internal/conformance/flux
	// TestDependencyNotReadyTakesTheWholeFluxPath.
	setStatus(t, env, api, func(hr *helmv2.HelmRelease) {
		hr.Status.ObservedGeneration = hr.Generation
		hr.Status.Conditions = []metav1.Condition{condition(meta.ReadyCondition, "False", meta.DependencyNotReadyReason,
			"dependency '"+ns+"/postgres' is not ready", waitingSince)}
	})
	return api, postgres
}

// scenarioRetriesExhausted: a release stalled after its upgrade retries ran out.
//
// hand-written state: Stalled RetriesExceeded an hour ago, on an apiserver with no helm-controller; the real
// helm-controller v1.4.3 produces it (from install failures) in internal/conformance/flux
// TestRetriesExhaustedIsAnnouncedAndFixResetsTheRealRelease.
func scenarioRetriesExhausted(t *testing.T, env *testenv.Env, ns, name string) *helmv2.HelmRelease {
	hr := createRelease(t, env, ns, name)
	setStatus(t, env, hr, func(hr *helmv2.HelmRelease) {
		at := time.Now().Add(-time.Hour)
		hr.Status.ObservedGeneration = hr.Generation
		hr.Status.UpgradeFailures = 4
		hr.Status.Conditions = []metav1.Condition{
			condition(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "Helm upgrade failed: timed out waiting for the condition", at),
			condition(meta.StalledCondition, "True", "RetriesExceeded", "Failed to upgrade after 3 attempt(s)", at),
		}
	})
	return hr
}
