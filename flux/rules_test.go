package flux

import (
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func release(name string, gen, observed int64, conds ...metav1.Condition) *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{}
	hr.Name, hr.Namespace, hr.Generation = name, "apps", gen
	hr.Status.ObservedGeneration = observed
	hr.Status.Conditions = conds
	return hr
}

func cond(t, status, reason, msg string, age time.Duration) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-age))}
}

func metav1Ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

func withHistory(hr *helmv2.HelmRelease) *helmv2.HelmRelease {
	hr.Status.History = helmv2.Snapshots{{Name: hr.Name, Namespace: hr.Namespace, Version: 3, Status: "deployed", ChartName: "redis", ChartVersion: "18.1.0"}}
	return hr
}

func TestEvaluateRelease(t *testing.T) {
	th := DefaultThresholds()
	readyDep := withHistory(release("postgres", 4, 4, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, "Helm upgrade succeeded for release apps/postgres.v3 with chart postgres@12.1.0", time.Hour)))
	notReadyDep := withHistory(release("postgres", 4, 4, cond(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "upgrade failed", time.Hour)))
	behindDep := withHistory(release("postgres", 5, 4, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, "Helm upgrade succeeded for release apps/postgres.v3 with chart postgres@12.1.0", time.Hour)))
	waiting := func() *helmv2.HelmRelease {
		hr := release("api", 7, 7, cond(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, "dependency 'apps/postgres' is not ready", time.Hour))
		hr.Spec.DependsOn = []meta.NamespacedObjectReference{{Name: "postgres"}}
		return hr
	}
	deps := func(d *helmv2.HelmRelease) map[types.NamespacedName]*helmv2.HelmRelease {
		return map[types.NamespacedName]*helmv2.HelmRelease{{Namespace: "apps", Name: "postgres"}: d}
	}
	tests := []struct {
		name  string
		obs   ReleaseObservation
		want  []syncmedic.RuleID
		check func(t *testing.T, fs []syncmedic.Finding)
	}{
		{
			name: "a release with the old Ready message, no history and an unobserved generation has a stale status",
			obs:  ReleaseObservation{Release: release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", 2*time.Hour)), ControllerVersion: "v0.36.2"},
			want: []syncmedic.RuleID{syncmedic.RuleHelmReleaseStaleStatus},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, syncmedic.ActionFluxReconcile, fs[0].Remedy.Action)
				require.Equal(t, "flux reconcile helmrelease redis -n apps", fs[0].Remedy.Commands[0])
				require.Contains(t, fs[0].Advisories[0], "predates v0.37.0")
			},
		},
		{
			name: "a release with the old message whose generation was observed is not stale",
			obs:  ReleaseObservation{Release: release("redis", 3, 3, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Release reconciliation succeeded", 2*time.Hour))},
		},
		{
			name: "a release with the new message format is not stale even if a generation is pending",
			obs:  ReleaseObservation{Release: withHistory(release("redis", 3, 2, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, "Helm upgrade succeeded for release apps/redis.v3 with chart redis@18.1.0", 2*time.Hour)))},
		},
		{
			name: "a stale status inside the threshold is not reported yet",
			obs:  ReleaseObservation{Release: release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", time.Minute))},
		},
		{
			name: "DependencyNotReady while the dependency is Ready at its generation is false",
			obs:  ReleaseObservation{Release: waiting(), Dependencies: deps(readyDep), DependenciesKnown: true},
			want: []syncmedic.RuleID{syncmedic.RuleDependencyNotReadyFalse},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "dependency apps/postgres", fs[0].Evidence[1].Field)
				require.Equal(t, now.Add(-time.Hour), fs[0].Since, "counted from when the last dependency became Ready")
				require.Equal(t, "false", fs[0].Remedy.Params[ParamEscalate], "a forced reconcile does not change a dependency check")
				require.Len(t, fs[0].Remedy.Commands, 2)
				require.NotContains(t, fs[0].Remedy.Commands[0]+fs[0].Remedy.Commands[1], "--force")
			},
		},
		{
			name: "a bootstrap chain whose dependency turned Ready a minute ago is not reported, however long the dependent waited",
			obs: ReleaseObservation{Release: waiting(), DependenciesKnown: true,
				Dependencies: deps(withHistory(release("postgres", 4, 4, cond(meta.ReadyCondition, "True", helmv2.InstallSucceededReason, "Helm install succeeded for release apps/postgres.v1 with chart postgres@12.1.0", time.Minute))))},
		},
		{
			name: "a suspended dependent is not reported: helm-controller does not reconcile it",
			obs: func() ReleaseObservation {
				hr := waiting()
				hr.Spec.Suspend = true
				return ReleaseObservation{Release: hr, Dependencies: deps(readyDep), DependenciesKnown: true}
			}(),
		},
		{
			name: "a dependency with a readyExpr is judged by its expression, not the built-in check: not reported",
			obs: ReleaseObservation{Release: waiting(), Dependencies: deps(readyDep), DependenciesKnown: true,
				ReadyExprs: map[types.NamespacedName]string{{Namespace: "apps", Name: "postgres"}: "dep.status.observedGeneration == dep.metadata.generation"}},
		},
		{
			name: "a release waiting on a dependency that really is not ready is not reported",
			obs:  ReleaseObservation{Release: waiting(), Dependencies: deps(notReadyDep), DependenciesKnown: true},
		},
		{
			name: "a release waiting on a dependency whose new generation is not yet observed is not reported",
			obs:  ReleaseObservation{Release: waiting(), Dependencies: deps(behindDep), DependenciesKnown: true},
		},
		{
			name: "a release waiting on a dependency that is missing is not reported",
			obs:  ReleaseObservation{Release: waiting(), Dependencies: map[types.NamespacedName]*helmv2.HelmRelease{}, DependenciesKnown: true},
		},
		{
			name: "without knowing the dependencies nothing is claimed",
			obs:  ReleaseObservation{Release: waiting()},
		},
		{
			name: "a release stalled with retries exceeded asks for a reset",
			obs: ReleaseObservation{Release: release("cache", 2, 2,
				cond(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "Helm upgrade failed: timed out waiting for the condition", time.Hour),
				cond(meta.StalledCondition, "True", RetriesExceededReason, "Failed to upgrade after 3 attempt(s)", time.Hour))},
			want: []syncmedic.RuleID{syncmedic.RuleRetriesExhausted},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, syncmedic.ActionFluxResetReconcile, fs[0].Remedy.Action)
				require.Equal(t, "flux reconcile helmrelease cache -n apps --reset", fs[0].Remedy.Commands[0])
			},
		},
		{
			name: "a v2beta1-era release that says upgrade retries exhausted asks for a reset",
			obs:  ReleaseObservation{Release: release("cache", 2, 2, cond(meta.ReadyCondition, "False", "UpgradeFailed", "upgrade retries exhausted", time.Hour))},
			want: []syncmedic.RuleID{syncmedic.RuleRetriesExhausted},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, now.Add(-time.Hour), fs[0].Since, "since the Ready condition's transition")
			},
		},
		{
			name: "a deleted release whose uninstall fails is stuck deleting, and says so",
			obs: func() ReleaseObservation {
				hr := release("legacy", 2, 2, cond(meta.ReadyCondition, "False", "UninstallFailed", "Helm uninstall failed: context deadline exceeded", 50*time.Minute))
				hr.DeletionTimestamp, hr.Finalizers = metav1Ago(time.Hour), []string{helmv2.HelmReleaseFinalizer}
				return ReleaseObservation{Release: hr}
			}(),
			want: []syncmedic.RuleID{syncmedic.RuleReleaseDeletionStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Summary, "the uninstall fails (UninstallFailed")
				require.Equal(t, now.Add(-time.Hour), fs[0].Since)
				require.Equal(t, syncmedic.ActionNone, fs[0].Remedy.Action, "removing the finalizer leaves the release installed: never automatic")
			},
		},
		{
			name: "a deleted release no controller touched since names the controller",
			obs: func() ReleaseObservation {
				hr := release("legacy", 2, 2, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, "ok", 3*time.Hour))
				hr.DeletionTimestamp, hr.Finalizers = metav1Ago(time.Hour), []string{helmv2.HelmReleaseFinalizer}
				return ReleaseObservation{Release: hr}
			}(),
			want: []syncmedic.RuleID{syncmedic.RuleReleaseDeletionStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Contains(t, fs[0].Summary, "no helm-controller has updated it since it was deleted")
			},
		},
		{
			name: "a release deleted a moment ago is not stuck yet",
			obs: func() ReleaseObservation {
				hr := release("legacy", 2, 2)
				hr.DeletionTimestamp, hr.Finalizers = metav1Ago(time.Minute), []string{helmv2.HelmReleaseFinalizer}
				return ReleaseObservation{Release: hr}
			}(),
		},
		{
			name: "a failing release that is not stalled is not reported",
			obs:  ReleaseObservation{Release: release("cache", 2, 2, cond(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "Helm upgrade failed", time.Hour))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := EvaluateRelease(tt.obs, now, th)
			var got []syncmedic.RuleID
			for _, f := range fs {
				got = append(got, f.Rule)
				require.NotEmpty(t, f.Evidence)
				require.NotEmpty(t, f.Remedy.Commands)
			}
			require.Equal(t, tt.want, got)
			if tt.check != nil {
				tt.check(t, fs)
			}
		})
	}
}

func TestEvaluateCRD(t *testing.T) {
	t.Run("a CRD that still stores v2beta1 must be migrated", func(t *testing.T) {
		fs := EvaluateCRD(CRDObservation{StoredVersions: []string{"v2beta1", "v2"}, Storage: "v2"}, now)
		require.Len(t, fs, 1)
		require.Equal(t, syncmedic.RuleDeprecatedStoredVersion, fs[0].Rule)
		require.Contains(t, fs[0].Summary, "v2beta1")
		require.Equal(t, "flux migrate", fs[0].Remedy.Commands[0])
	})
	t.Run("a CRD that stores only v2 is fine", func(t *testing.T) {
		require.Empty(t, EvaluateCRD(CRDObservation{StoredVersions: []string{"v2"}}, now))
	})
}

func BenchmarkEvaluateRelease(b *testing.B) {
	obs := ReleaseObservation{Release: release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", 2*time.Hour))}
	th := DefaultThresholds()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if len(EvaluateRelease(obs, now, th)) != 1 {
			b.Fatal("want one finding")
		}
	}
}

// StaleStatus recognises a pre-v2beta2 status by its Ready message alone when the release has no history and a
// generation pending: exactly the five messages those controllers wrote, and nothing a newer controller writes.
func TestStaleStatusKnowsTheOldReadyMessages(t *testing.T) {
	tests := []struct {
		msg   string
		stale bool
	}{
		{"Helm install succeeded", true},
		{"Helm upgrade succeeded", true},
		{"Helm rollback succeeded", true},
		{"Helm test succeeded", true},
		{"Release reconciliation succeeded", true},
		{"  Helm upgrade succeeded\n", true},
		{"Helm upgrade succeeded for release apps/redis.v3 with chart redis@18.1.0", false},
		{"Helm install succeeded for release apps/redis.v1 with chart redis@18.1.0", false},
		{"helm upgrade succeeded", false},
		{"Helm uninstall succeeded", false},
		{"Helm upgrade succeeded.", false},
		{"", false},
	}
	for _, tt := range tests {
		name := "the Ready message " + strconv.Quote(tt.msg) + " is not from an old controller"
		if tt.stale {
			name = "the Ready message " + strconv.Quote(tt.msg) + " is from an old controller"
		}
		t.Run(name, func(t *testing.T) {
			hr := release("redis", 3, 2, cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", tt.msg, 2*time.Hour))
			fs := StaleStatus(ReleaseObservation{Release: hr}, now, DefaultThresholds())
			require.Equal(t, tt.stale, len(fs) == 1, "findings: %v", fs)
		})
	}
}
