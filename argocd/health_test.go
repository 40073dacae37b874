package argocd

import (
	"context"
	"testing"
	"time"

	accountpkg "github.com/argoproj/argo-cd/v2/pkg/apiclient/account"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/application"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// hand-written state: healthWaitApp and failedAutoSyncApp build applications in memory for the pure rule tests,
// as the real controllers write them (gitops-engine's setRunningPhase; autoSync's SyncError condition, quoted in
// health.go and autosync.go); internal/conformance/argo drives the real v2.14.21 and v3.6.1 controllers into them.

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

// healthGetter is argocd-server as v3 answers: List without status.resources[].health, Get with it.
type healthGetter struct {
	fakeArgo
	full *v1alpha1.Application
	gets int
}

func (f *healthGetter) Get(context.Context, *application.ApplicationQuery, ...grpc.CallOption) (*v1alpha1.Application, error) {
	f.gets++
	return f.full.DeepCopy(), nil
}

func TestScanReadsTheHealthListLeavesOut(t *testing.T) {
	full := healthWaitApp(40*time.Minute, health.HealthStatusProgressing, "Waiting for rollout to finish: 0 of 1 updated replicas are available...")
	listed := full.DeepCopy()
	for i := range listed.Status.Resources {
		listed.Status.Resources[i].Health = nil
	}
	healthy := app(nil)
	healthy.Name = "calm"
	f := &healthGetter{fakeArgo: fakeArgo{version: "v3.6.1", apps: []v1alpha1.Application{*listed, *healthy}}, full: full}
	fs, problems, err := Scan(context.Background(), ScanOptions{Client: f, Access: allowAll{}}, now)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, []syncmedic.RuleID{syncmedic.RuleWaitingForHealth}, ruleIDs(fs))
	require.Contains(t, fs[0].Summary, "it is Progressing: Waiting for rollout to finish")
	require.Equal(t, 1, f.gets, "only the application waiting on an unknown health is read again")
}

// allowAll answers yes to every CanI.
type allowAll struct{}

func (allowAll) CanI(context.Context, *accountpkg.CanIRequest, ...grpc.CallOption) (*accountpkg.CanIResponse, error) {
	return &accountpkg.CanIResponse{Value: "yes"}, nil
}
