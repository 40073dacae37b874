package flux

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

// benchRule runs one rule over a matching observation ("fires") and over a healthy release ("healthy", the common
// case in a fleet), failing if either verdict is not the expected one. No time is asserted.
func benchRule(b *testing.B, rule func(ReleaseObservation, time.Time, Thresholds) []syncmedic.Finding, fires ReleaseObservation) {
	th := DefaultThresholds()
	healthy := ReleaseObservation{Release: withHistory(release("web", 4, 4, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason,
		"Helm upgrade succeeded for release apps/web.v3 with chart web@1.2.3", time.Hour))), DependenciesKnown: true}
	for _, bc := range []struct {
		name string
		obs  ReleaseObservation
		want int
	}{{"fires", fires, 1}, {"healthy", healthy, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := len(rule(bc.obs, now, th)); got != bc.want {
					b.Fatalf("got %d findings, want %d", got, bc.want)
				}
			}
		})
	}
}

func BenchmarkStaleStatus(b *testing.B) {
	benchRule(b, StaleStatus, ReleaseObservation{Release: release("redis", 3, 2,
		cond(meta.ReadyCondition, "True", "ReconciliationSucceeded", "Helm upgrade succeeded", 2*time.Hour)), ControllerVersion: "v0.36.2"})
}

func BenchmarkDependencyNotReadyFalse(b *testing.B) {
	hr := release("api", 7, 7, cond(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, "dependency 'apps/postgres' is not ready", time.Hour))
	hr.Spec.DependsOn = []meta.NamespacedObjectReference{{Name: "postgres"}}
	dep := withHistory(release("postgres", 4, 4, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason,
		"Helm upgrade succeeded for release apps/postgres.v3 with chart postgres@12.1.0", time.Hour)))
	benchRule(b, DependencyNotReadyFalse, ReleaseObservation{Release: hr, DependenciesKnown: true,
		Dependencies: map[types.NamespacedName]*helmv2.HelmRelease{{Namespace: "apps", Name: "postgres"}: dep}})
}

func BenchmarkRetriesExhausted(b *testing.B) {
	benchRule(b, RetriesExhausted, ReleaseObservation{Release: release("cache", 2, 2,
		cond(meta.ReadyCondition, "False", helmv2.UpgradeFailedReason, "Helm upgrade failed: timed out waiting for the condition", time.Hour),
		cond(meta.StalledCondition, "True", RetriesExceededReason, "Failed to upgrade after 3 attempt(s)", time.Hour))})
}

func BenchmarkEvaluateCRD(b *testing.B) {
	for _, bc := range []struct {
		name string
		obs  CRDObservation
		want int
	}{
		{"fires", CRDObservation{Name: CRDName, StoredVersions: []string{"v2beta1", "v2"}, Served: []string{"v2beta1", "v2beta2", "v2"}, Storage: "v2"}, 1},
		{"healthy", CRDObservation{Name: CRDName, StoredVersions: []string{"v2"}, Served: []string{"v2"}, Storage: "v2"}, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := len(EvaluateCRD(bc.obs, now)); got != bc.want {
					b.Fatalf("got %d findings, want %d", got, bc.want)
				}
			}
		})
	}
}
