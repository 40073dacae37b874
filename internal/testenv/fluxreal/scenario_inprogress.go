package fluxreal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallInProgress is the state ScenarioInstallInProgress leaves: helm-controller running the install action of a
// release whose Job waits on the real node for the test's gate.
type InstallInProgress struct {
	Namespace, Name string
	// Started is when helm-controller marked the release Ready=Unknown for the install.
	Started time.Time
	// Job is the install's chart Job, running on the node until Finish.
	Job *HeldJob
	// Finish opens the gate of the install's Job (Job.Finish), so the Job completes.
	Finish func()
}

// InstallingMessage is the Ready message helm-controller v1.4.3 writes as it starts an install with timeout
// (internal/reconcile/atomic_release.go).
func InstallingMessage(timeout time.Duration) string {
	return fmt.Sprintf("Running 'install' action with timeout of %s", timeout)
}

// ScenarioInstallInProgress publishes JobChart(name, 1.0.0) and creates its release with spec.timeout timeout: the
// real helm-controller starts the install (Ready=Unknown, "Running 'install' action with timeout of …"), Helm records
// the release pending-install in its storage Secret, and the install waits for the chart's Job, whose container on
// the real node waits for the gate Finish opens. It returns once both are seen. The stack must run on the real node's
// control plane.
func (s *Stack) ScenarioInstallInProgress(t testing.TB, namespace string, repo *Repo, name string, timeout time.Duration) InstallInProgress {
	t.Helper()
	sc := InstallInProgress{Namespace: namespace, Name: name, Job: s.holdJob(t, namespace, name)}
	sc.Finish = func() { sc.Job.Finish(t) }
	repo.Publish(t, sc.Job.Chart("1.0.0"))
	s.CreateRelease(t, namespace, Release{Name: name, Chart: name, Version: "1.0.0", Timeout: timeout})
	hr := s.WaitFor(t, namespace, name, waitInstall, "installing", func(hr *helmv2.HelmRelease) bool {
		c := Condition(hr, meta.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionUnknown && c.Message == InstallingMessage(timeout)
	})
	sc.Started = Condition(hr, meta.ReadyCondition).LastTransitionTime.Time
	// Helm records pending-install before it creates the chart's objects: a test that froze helm-controller then
	// could stop it before the Job exists (a cold run's ReleaseInProgressPastItsTimeout waited 60 s for a Job that
	// was never created). The install is in progress once the Job's container has also started on the node.
	deadline := time.Now().Add(waitInstall)
	for {
		status, runs := s.StorageStatus(t, namespace, name), sc.Job.Runs(t)
		if status == "pending-install" && runs > 0 {
			return sc
		}
		if time.Now().After(deadline) {
			t.Fatalf("fluxreal: after %s, Helm's storage of %s/%s says %q and its chart Job started %d time(s) on the node; want pending-install and a started Job",
				waitInstall, namespace, name, status, runs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// StorageStatus is the status label of the newest Helm release Secret of release name in namespace ("" for none):
// what Helm's storage says of the release.
func (s *Stack) StorageStatus(t testing.TB, namespace, name string) string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := s.Env.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatalf("fluxreal: listing Helm's release Secrets of %s/%s: %v", namespace, name, err)
	}
	status, newest := "", ""
	for _, sec := range list.Items {
		if v := sec.Labels["version"]; status == "" || len(v) > len(newest) || (len(v) == len(newest) && v > newest) {
			status, newest = sec.Labels["status"], v
		}
	}
	return strings.TrimSpace(status)
}
