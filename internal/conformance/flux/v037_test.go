package flux_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// On Flux 2.2 (helm-controller v0.37.2 with its own CRDs, which serve v2beta1 and v2beta2 but not v2), the same
// failures play out for real: retries exhausted and DependencyNotReady. The test records what syncmedic serve makes
// of them there: its HelmRelease watch needs helm.toolkit.fluxcd.io/v2, so only the event receiver runs.
func TestFlux22FailuresAreRecordedWithWhatServeSees(t *testing.T) {
	env := testenv.KubePrivate(t)
	t.Parallel()
	stack := fluxreal.Start(t, env, fluxreal.Options{Helm: fluxreal.HelmControllerV037, Notifications: true})
	ns := env.Namespace(t)
	repo := fluxreal.NewRepo(t)
	fluxreal.CreateRepository(t, env, ns, repo)
	d := startServe(t, stack, ns, autoPolicy, smallThresholds...)
	version := "helm-controller " + fluxreal.HelmControllerV037.Version

	retries := &conformance.Row{Version: version, Scenario: "retries exhausted (install fails 3 times)"}
	defer record(t, retries)
	sc := stack.ScenarioRetriesExhausted(t, ns, repo, "cache", 2)
	stalled := fluxreal.Condition(sc.Release, meta.StalledCondition)
	retries.Controller = fmt.Sprintf("Stalled=True %s %q, installFailures %d", stalled.Reason, stalled.Message, sc.Release.Status.InstallFailures)

	dnr := &conformance.Row{Version: version, Scenario: "DependencyNotReady (dependency fails, then recovers)"}
	defer record(t, dnr)
	dep := stack.ScenarioDependencyNotReady(t, ns, repo)
	ready := fluxreal.Condition(dep.DependentRelease, meta.ReadyCondition)
	dnr.Controller = fmt.Sprintf("dependent Ready=False %s %q while the dependency is Stalled", ready.Reason, ready.Message)

	require.Eventually(t, func() bool {
		return strings.Contains(d.logs.String(), fmt.Sprintf("kind=HelmRelease namespace=%s name=%s reason=%s", ns, dep.Dependent, helmv2.DependencyNotReadyReason))
	}, 60*time.Second, 200*time.Millisecond, "v0.37.2's events reach the receiver through notification-controller")
	require.Contains(t, d.logs.String(), "does not serve helm.toolkit.fluxcd.io/v2 HelmReleases: the HelmRelease watch is off")
	seen := "no finding: serve's HelmRelease watch needs helm.toolkit.fluxcd.io/v2, which Flux 2.2's CRDs do not serve, so only the receiver runs (the events arrive, signed and accepted, and trigger nothing)"
	if n := len(d.slack.all()); n > 0 {
		seen = fmt.Sprintf("%d Slack messages", n)
	}
	retries.Syncmedic, dnr.Syncmedic = seen, seen
}
