package flux_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/fluxreal"
)

// The install timeout (spec.timeout) and the flux/helmrelease-ready-unknown threshold of these tests: a release is
// reported once it has been in progress for installTimeout + readyUnknownThreshold.
const (
	installTimeout        = 30 * time.Second
	readyUnknownThreshold = 10 * time.Second
)

// readyUnknownPolicy applies flux/helmrelease-ready-unknown's remedy (a plain reconcile request) after its threshold.
var readyUnknownPolicy = fmt.Sprintf(`resolveAfter: 1
rules:
  flux/helmrelease-ready-unknown: {mode: auto, threshold: %s}
`, readyUnknownThreshold)

// jobComplete reports whether the chart's Job of release name has completed.
func jobComplete(t *testing.T, env *testenv.Env, ns, name string) bool {
	t.Helper()
	job := &batchv1.Job{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-migrate"}, job); err != nil {
		return false
	}
	return job.Status.Succeeded > 0
}

// Issue 30 item 6 (fluxcd/helm-controller #1101, #1409) on the real helm-controller v1.4.3: it starts an install
// (Ready=Unknown "Running 'install' action with timeout of 30s", Helm's storage pending-install) whose chart's Job (a
// container on the real node) waits for the test's gate, and freezes there (SIGSTOP, as a hung process or a frozen node would); the Job then
// completes, so what the release deployed is in place while the status and Helm's storage say the install is still
// going. serve, reading Helm's storage (--flux-read-helm-storage), announces flux/helmrelease-ready-unknown about the
// release past the timeout plus the threshold, with the storage's pending-install as evidence, and on auto writes
// one plain reconcile request (requestedAt, no forceAt or resetAt). helm-controller restarted (the Pod a crash
// would restart) handles that request and ends the release's in-progress state; the incident resolves, and nothing
// else is announced; the Job's container started once in all. It runs a stack of its own (watching only its
// namespace of the node's apiserver): stopping a shared helm-controller would stall other tests.
func releaseInProgressPastItsTimeoutIsReportedWithHelmStorage(t *testing.T) {
	row := &conformance.Row{Version: helmV1, Kubelet: "real", Scenario: fmt.Sprintf("install in progress (Ready=Unknown) while helm-controller is frozen mid-install (SIGSTOP), its Job then complete (serve auto, --flux-read-helm-storage; ready-unknown %s past the %s timeout)", readyUnknownThreshold, installTimeout)}
	defer record(t, row)
	stack, ns, repo := setupNode(t, fluxreal.Options{Helm: fluxreal.HelmControllerV1})
	sc := stack.ScenarioInstallInProgress(t, ns, repo, "frozen", installTimeout)
	stack.PauseHelmController(t)
	sc.Finish()
	require.Eventually(t, func() bool { return jobComplete(t, stack.Env, ns, "frozen") }, 60*time.Second, 200*time.Millisecond, "the Job completes while helm-controller is frozen")
	frozen := stack.Get(t, ns, "frozen")
	storage := stack.StorageStatus(t, ns, "frozen")
	row.Controller = fmt.Sprintf("install started, helm-controller frozen, Job completed: Ready %q, Helm storage %s", fluxreal.Condition(frozen, meta.ReadyCondition).Message, storage)
	require.Equal(t, "pending-install", storage)

	d := startServe(t, stack, ns, readyUnknownPolicy, "--flux-read-helm-storage")
	root := announcedOnce(t, d.slack, syncmedic.RuleReadyUnknownStuck, "frozen", installTimeout+readyUnknownThreshold+60*time.Second, "flux/helmrelease-ready-unknown announced")
	require.False(t, time.Now().Before(sc.Started.Add(installTimeout+readyUnknownThreshold)), "not before the timeout plus the threshold")
	require.Contains(t, root.Text+root.Blocks, "revision 1 is pending-install", "Helm's storage is the evidence")
	var requested *helmv2.HelmRelease
	require.Eventually(t, func() bool {
		requested = stack.Get(t, ns, "frozen")
		return requestAnnotations(requested)[meta.ReconcileRequestAnnotation] != ""
	}, 60*time.Second, 200*time.Millisecond, "the remedy writes a reconcile request")
	ann := requestAnnotations(requested)
	require.Empty(t, ann[helmv2.ForceRequestAnnotation], "never forced")
	require.Empty(t, ann[helmv2.ResetRequestAnnotation], "never reset")
	row.Syncmedic = "flux/helmrelease-ready-unknown announced with Helm's storage (revision 1 pending-install); one plain reconcile request (requestedAt only)"

	stack.StopHelmController()
	require.NoError(t, stack.StartHelmController(fluxreal.HelmControllerV1))
	after := stack.WaitFor(t, ns, "frozen", 3*time.Minute, "the request handled and the install no longer in progress", func(hr *helmv2.HelmRelease) bool {
		c := fluxreal.Condition(hr, meta.ReadyCondition)
		return handled(hr) && c != nil && c.Status != "Unknown"
	})
	require.Eventually(t, func() bool {
		for _, p := range d.slack.thread(root.TS) {
			if strings.Contains(strings.ToLower(p.Text), "resolved") {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "the incident resolves once the release is no longer in progress")
	runs := sc.Job.Runs(t)
	row.Controller += fmt.Sprintf("; helm-controller restarted: request handled, %s, Helm storage %s; the Job's container started %d time(s)", fluxreal.Describe(after), stack.StorageStatus(t, ns, "frozen"), runs)
	require.Equal(t, 1, runs, "the chart's Job ran exactly once: the request did not run it again")
	row.Syncmedic += "; resolved once the restarted controller handled it"
	for _, r := range d.slack.roots() {
		require.Contains(t, r.Text+r.Blocks, string(syncmedic.RuleReadyUnknownStuck), "nothing else announced: %s", d.slack.Summary())
	}
	require.Len(t, d.slack.roots(), 1, "one incident: %s", d.slack.Summary())
}

// The near miss: a long install still within its timeout is progress. helm-controller v1.4.3 installs a release
// whose Job takes 20s of a 30s timeout; serve (threshold 10s) watches well past the timeout plus the threshold counted
// from the install's start, evaluates the release, and announces nothing. The Job is a container on the real node
// that waits for the test's gate.
func longInstallWithinItsTimeoutIsNotReported(t *testing.T) {
	stack, ns, repo := setupNode(t, fluxreal.Options{Notifications: true})
	row := &conformance.Row{Version: helmV1, Kubelet: "real", Scenario: fmt.Sprintf("install whose Job takes 20s of its %s timeout (serve auto, ready-unknown %s)", installTimeout, readyUnknownThreshold)}
	defer record(t, row)
	d := startServe(t, stack, ns, readyUnknownPolicy, "--flux-read-helm-storage")
	from := d.logLen()
	sc := stack.ScenarioInstallInProgress(t, ns, repo, "slow", installTimeout)
	time.Sleep(time.Until(sc.Started.Add(20 * time.Second)))
	require.Equal(t, "Unknown", string(fluxreal.Condition(stack.Get(t, ns, "slow"), meta.ReadyCondition).Status), "still installing after 20s")
	sc.Finish()
	ready := stack.WaitFor(t, ns, "slow", 90*time.Second, "Ready", fluxreal.IsReady)
	runs := sc.Job.Runs(t)
	row.Controller = fmt.Sprintf("installing for 20s (Ready=Unknown), then the Job completed: %s; the Job's container started %d time(s)", fluxreal.Describe(ready), runs)
	require.Equal(t, 1, runs, "the chart's Job ran exactly once")
	until := sc.Started.Add(installTimeout + readyUnknownThreshold + 15*time.Second)
	time.Sleep(time.Until(until))
	require.Empty(t, d.slack.roots(), "nothing announced: %s", d.slack.Summary())
	n := d.lookedAt(t, ns, "slow", from)
	row.Syncmedic = fmt.Sprintf("no finding until %s after the install started: evaluated %d times, nothing found", installTimeout+readyUnknownThreshold+15*time.Second, n)
}
