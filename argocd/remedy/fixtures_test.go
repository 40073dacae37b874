package remedy

import (
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv/argofixture"
)

// The fixtures of the remedies' unit tests: the same applications and operations the rules' own tests
// (argocd/rules) are written against.

// The shared fixtures (internal/testenv/argofixture).
var (
	now        = argofixture.Now
	ago        = argofixture.Ago
	app        = argofixture.App
	runningOp  = argofixture.RunningOp
	reconciled = argofixture.Reconciled
)

// healthWaitApp is app shop waiting for the healthy state of its Deployment web since started ago, whose health is
// status (none when empty).
func healthWaitApp(started time.Duration, status health.HealthStatusCode, msg string) *v1alpha1.Application {
	a := app(runningOp(started, "waiting for healthy state of apps/Deployment/web", ""))
	r := v1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web", Status: v1alpha1.SyncStatusCodeSynced}
	if status != "" {
		r.Health = &v1alpha1.HealthStatus{Status: status, Message: msg}
	}
	a.Status.Resources = []v1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "routes", SyncWave: 1}, r}
	return a
}
