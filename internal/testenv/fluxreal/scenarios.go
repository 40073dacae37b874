package fluxreal

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Bounded waits of the scenarios: installs and failures take seconds; a dependent re-checks its dependencies every
// 30s (--requeue-dependency), so anything waiting on that gets more than one period.
const (
	waitInstall    = 90 * time.Second
	waitDependency = 100 * time.Second
)

// RetriesExceededReason is the Stalled reason helm-controller v1.x sets when remediation retries are spent.
const RetriesExceededReason = "RetriesExceeded"

// RetriesExhausted is the state ScenarioRetriesExhausted leaves.
type RetriesExhausted struct {
	Namespace, Name string
	// MissingNamespace is the namespace the failing chart writes to; creating it removes the cause.
	MissingNamespace string
	// Release is the HelmRelease once Stalled.
	Release *helmv2.HelmRelease
}

// ScenarioRetriesExhausted publishes a chart whose install fails (FailingChart) and creates a HelmRelease for it
// with spec.install.remediation.retries = retries; the real helm-controller installs, fails, uninstalls, retries,
// and finally marks it Stalled=True reason RetriesExceeded. It returns once it is Stalled.
func (s *Stack) ScenarioRetriesExhausted(t testing.TB, namespace string, repo *Repo, name string, retries int) RetriesExhausted {
	t.Helper()
	sc := RetriesExhausted{Namespace: namespace, Name: name, MissingNamespace: namespace + "-missing"}
	repo.Publish(t, FailingChart(name, "1.0.0", sc.MissingNamespace))
	s.CreateRelease(t, namespace, Release{Name: name, Chart: name, Version: "1.0.0", InstallRetries: retries})
	sc.Release = s.WaitFor(t, namespace, name, waitInstall, "Stalled (RetriesExceeded)", func(hr *helmv2.HelmRelease) bool {
		return HasReason(hr, meta.StalledCondition, metav1.ConditionTrue, RetriesExceededReason)
	})
	return sc
}

// DependencyNotReady is the state ScenarioDependencyNotReady leaves.
type DependencyNotReady struct {
	Namespace string
	// Dependent waits on Dependency, whose install failed until its retries ran out.
	Dependent, Dependency string
	// MissingNamespace is what the dependency's chart needs; creating it removes the cause.
	MissingNamespace  string
	DependentRelease  *helmv2.HelmRelease
	DependencyRelease *helmv2.HelmRelease
}

// ScenarioDependencyNotReady creates a dependency whose chart fails to install (one retry, then Stalled) and a
// dependent (a chart of one ConfigMap) with spec.dependsOn on it: the real helm-controller reports the dependent
// Ready=False reason DependencyNotReady ("dependency 'ns/name' is not ready") and re-checks every
// --requeue-dependency. It returns once both states are there.
func (s *Stack) ScenarioDependencyNotReady(t testing.TB, namespace string, repo *Repo) DependencyNotReady {
	t.Helper()
	dep := s.ScenarioRetriesExhausted(t, namespace, repo, "database", 1)
	sc := DependencyNotReady{Namespace: namespace, Dependent: "api", Dependency: dep.Name, MissingNamespace: dep.MissingNamespace,
		DependencyRelease: dep.Release}
	repo.Publish(t, ConfigMapChart(sc.Dependent, "1.0.0"))
	s.CreateRelease(t, namespace, Release{Name: sc.Dependent, Chart: sc.Dependent, Version: "1.0.0", DependsOn: []string{sc.Dependency}})
	sc.DependentRelease = s.WaitFor(t, namespace, sc.Dependent, waitInstall, "DependencyNotReady", func(hr *helmv2.HelmRelease) bool {
		return HasReason(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.DependencyNotReadyReason)
	})
	return sc
}

// Installed creates a HelmRelease of a ConfigMap chart (published at version 1.0.0 unless already there) and waits
// until the real helm-controller reports it Ready.
func (s *Stack) Installed(t testing.TB, namespace string, repo *Repo, r Release) *helmv2.HelmRelease {
	t.Helper()
	if r.Chart == "" {
		r.Chart = r.Name
	}
	if r.Version == "" {
		r.Version = "1.0.0"
		repo.Publish(t, ConfigMapChart(r.Chart, r.Version))
	}
	s.CreateRelease(t, namespace, r)
	return s.WaitFor(t, namespace, r.Name, waitInstall, "Ready", IsReady)
}

// BootstrapChain is the state ScenarioBootstrapChain leaves: a dependency still installing and a dependent waiting
// for it, both healthy.
type BootstrapChain struct {
	Namespace, Dependency, Dependent string
	// Job is the dependency's chart Job, running on the node until Finish.
	Job *HeldJob
	// Finish opens the gate of the dependency's Job (Job.Finish), so its install completes.
	Finish func()
}

// ScenarioBootstrapChain creates, as a fresh cluster bootstrap does, a dependency whose install runs a Job (its
// container on the real node waits for the gate Finish opens) and a dependent with spec.dependsOn on it. Until
// Finish, the dependency is installing (Ready=Unknown, Reconciling) and the dependent Ready=False DependencyNotReady;
// after Finish the dependency turns Ready and the dependent follows on helm-controller's own dependency requeue (30s
// by default). The stack must run on the real node's control plane; it returns once the dependent says
// DependencyNotReady.
func (s *Stack) ScenarioBootstrapChain(t testing.TB, namespace string, repo *Repo) BootstrapChain {
	t.Helper()
	sc := BootstrapChain{Namespace: namespace, Dependency: "postgres", Dependent: "web"}
	sc.Job = s.holdJob(t, namespace, sc.Dependency)
	sc.Finish = func() { sc.Job.Finish(t) }
	repo.Publish(t, sc.Job.Chart("1.0.0"))
	repo.Publish(t, ConfigMapChart(sc.Dependent, "1.0.0"))
	s.CreateRelease(t, namespace, Release{Name: sc.Dependency, Chart: sc.Dependency, Version: "1.0.0"})
	s.CreateRelease(t, namespace, Release{Name: sc.Dependent, Chart: sc.Dependent, Version: "1.0.0", DependsOn: []string{sc.Dependency}})
	s.WaitFor(t, namespace, sc.Dependent, waitInstall, "DependencyNotReady", func(hr *helmv2.HelmRelease) bool {
		return HasReason(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.DependencyNotReadyReason)
	})
	s.WaitFor(t, namespace, sc.Dependency, waitInstall, "installing", func(hr *helmv2.HelmRelease) bool {
		return HasReason(hr, meta.ReconcilingCondition, metav1.ConditionTrue, meta.ProgressingReason)
	})
	return sc
}

// UpgradeInProgress is the state ScenarioUpgradeInProgress leaves.
type UpgradeInProgress struct {
	Namespace, Name string
	// Job is the upgrade's chart Job, running on the node until Finish.
	Job *HeldJob
	// Finish opens the gate of the upgrade's Job (Job.Finish), so the upgrade completes.
	Finish func()
}

// ScenarioUpgradeInProgress installs a release (a ConfigMap chart at 1.0.0), then publishes 1.1.0 with a Job and
// moves the release to it: the real helm-controller runs the upgrade and waits for the Job, whose container on the
// real node waits for the gate Finish opens. It returns once the upgrade is running. The stack must run on the real
// node's control plane.
func (s *Stack) ScenarioUpgradeInProgress(t testing.TB, namespace string, repo *Repo, name string) UpgradeInProgress {
	t.Helper()
	sc := UpgradeInProgress{Namespace: namespace, Name: name, Job: s.holdJob(t, namespace, name)}
	sc.Finish = func() { sc.Job.Finish(t) }
	s.Installed(t, namespace, repo, Release{Name: name})
	repo.Publish(t, sc.Job.Chart("1.1.0"))
	s.PatchRelease(t, namespace, name, map[string]any{"chart": map[string]any{"spec": map[string]any{"version": "1.1.0"}}})
	s.WaitFor(t, namespace, name, waitInstall, "upgrading", func(hr *helmv2.HelmRelease) bool {
		c := Condition(hr, meta.ReconcilingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && hr.Status.LastAttemptedRevision == "1.1.0"
	})
	return sc
}

// Suspended is the state ScenarioSuspended leaves.
type Suspended struct {
	Namespace, Name string
	// Before and After are the release before and after suspend plus a spec change.
	Before, After *helmv2.HelmRelease
}

// ScenarioSuspended installs a release, then suspends it and changes its chart version in the same patch (a user
// pausing a release during maintenance): helm-controller does not act on the change. It returns after the
// controller has seen the new generation (or after settle, when it never records it).
func (s *Stack) ScenarioSuspended(t testing.TB, namespace string, repo *Repo, name string, settle time.Duration) Suspended {
	t.Helper()
	sc := Suspended{Namespace: namespace, Name: name}
	sc.Before = s.Installed(t, namespace, repo, Release{Name: name})
	repo.Publish(t, ConfigMapChart(name, "1.0.1"))
	s.PatchRelease(t, namespace, name, map[string]any{"suspend": true, "chart": map[string]any{"spec": map[string]any{"version": "1.0.1"}}})
	deadline := time.Now().Add(settle)
	for {
		sc.After = s.Get(t, namespace, name)
		if sc.After.Status.ObservedGeneration == sc.After.Generation || time.Now().After(deadline) {
			return sc
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ScenarioStuckDeleting installs a release, stops helm-controller (as when it is scaled down or crashing) and
// deletes the release: it stays with its deletionTimestamp and finalizers.fluxcd.io, since only the controller
// removes it (helm-controller #554). Use it on a stack of the test's own (Start), never the Shared one.
func (s *Stack) ScenarioStuckDeleting(t testing.TB, namespace string, repo *Repo, name string) *helmv2.HelmRelease {
	t.Helper()
	s.Installed(t, namespace, repo, Release{Name: name})
	s.StopHelmController()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(s.Helm.APIVersion)
	u.SetKind(helmv2.HelmReleaseKind)
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := s.Env.Client.Delete(context.Background(), u); err != nil {
		t.Fatalf("fluxreal: deleting HelmRelease %s/%s: %v", namespace, name, err)
	}
	return s.WaitFor(t, namespace, name, 10*time.Second, "deleting", func(hr *helmv2.HelmRelease) bool {
		return hr.DeletionTimestamp != nil
	})
}

// WaitDependencyCheck waits for helm-controller's next dependency check of HelmRelease namespace/name that found a
// dependency not ready (its log line "dependencies do not meet ready condition"), and returns when it happened. A
// test that wants to act right after a check — so the next one is a full --requeue-dependency away — uses it.
func (s *Stack) WaitDependencyCheck(t testing.TB, namespace, name string, timeout time.Duration) time.Time {
	t.Helper()
	marker := fmt.Sprintf(`"HelmRelease": {"name":%q,"namespace":%q}`, name, namespace)
	count := func() int {
		data, err := os.ReadFile(s.Controller.LogPath)
		if err != nil {
			t.Fatalf("fluxreal: %v", err)
		}
		n := 0
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "dependencies do not meet ready condition") && strings.Contains(line, marker) {
				n++
			}
		}
		return n
	}
	before := count()
	deadline := time.Now().Add(timeout)
	for count() == before {
		if time.Now().After(deadline) {
			t.Fatalf("fluxreal: no dependency check of %s/%s within %s", namespace, name, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Now()
}
