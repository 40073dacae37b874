package flux_test

import (
	"testing"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// The scenarios whose Helm chart has a Job run on the real node: the Job's Pod is a busybox container that counts
// its start and waits for the test's gate (fluxreal.HeldJob). They are the parallel subtests of one parallel test,
// so that the package holds the machine's one node (testenv.RealNodeWhileUsed) only while they run: their parent
// queues them when it runs, behind every other parallel test of the package (go test starts parallel tests in the
// order they asked), the node starts with the first of them and stops a minute after the last. Each starts a Flux stack of its own on the node's apiserver, watching only its namespace.
func TestHelmChartJobsOnTheRealNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"BootstrapChainIsNotAnIncident", bootstrapChainIsNotAnIncident},
		{"UpgradeInProgressIsNotAnIncident", upgradeInProgressIsNotAnIncident},
		{"ReleaseInProgressPastItsTimeoutIsReportedWithHelmStorage", releaseInProgressPastItsTimeoutIsReportedWithHelmStorage},
		{"LongInstallWithinItsTimeoutIsNotReported", longInstallWithinItsTimeoutIsNotReported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

// setupNode starts a Flux stack with options o on the real node's control plane, watching only a fresh namespace
// that has its own Helm repository and HelmRepository, and returns them: the stack's chart Jobs run on the node.
func setupNode(t *testing.T, o fluxreal.Options) (*fluxreal.Stack, string, *fluxreal.Repo) {
	t.Helper()
	env := testenv.RealNodeWhileUsed(t).Env
	o.Namespace = env.Namespace(t)
	stack := fluxreal.Start(t, env, o)
	repo := fluxreal.NewRepo(t)
	fluxreal.CreateRepository(t, env, o.Namespace, repo)
	return stack, o.Namespace, repo
}
