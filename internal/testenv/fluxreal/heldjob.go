package fluxreal

import (
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// HeldJob is the Job of a release's chart (JobChart) in one namespace, run as a container on the real node that
// waits for its gate: helm-controller waits for it until the test calls Finish, and Runs counts how often the
// container really started.
type HeldJob struct {
	// HostDir is the node's host directory of the namespace's chart Jobs: <job>.runs and the gates <job>.open.
	HostDir string
	release string
}

// holdJob returns the held Job of release in namespace, creating its host directory on the node. The stack must run
// on the real node's control plane (testenv.RealNodeWhileUsed(t).Env): no scenario of a chart Job plays the kubelet
// any more.
func (s *Stack) holdJob(t testing.TB, namespace, release string) *HeldJob {
	t.Helper()
	n := s.Env.Node()
	if n == nil {
		t.Fatalf("fluxreal: the chart Job of %s/%s needs a stack on the real node's control plane (testenv.RealNodeWhileUsed)", namespace, release)
	}
	j := &HeldJob{HostDir: filepath.Join(n.Dir, "chart-jobs", namespace), release: release}
	if err := os.MkdirAll(j.HostDir, 0o755); err != nil {
		t.Fatalf("fluxreal: creating the chart Jobs' host directory: %v", err)
	}
	return j
}

// Chart is JobChart(release, version) with this Job's host directory.
func (j *HeldJob) Chart(version string) *chart.Chart { return JobChart(j.release, version, j.HostDir) }

// job is the Job's name, as JobChart names it.
func (j *HeldJob) job() string { return j.release + "-migrate" }

// Finish opens the gate: the running container exits 0 within 0.2s, and every later run of the Job at once.
func (j *HeldJob) Finish(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(j.HostDir, j.job()+".open"), nil, 0o644); err != nil {
		t.Fatalf("fluxreal: opening the gate of Job %s: %v", j.job(), err)
	}
}

// Runs returns how many times the Job's container started on the node (one line per start, naming its Pod).
func (j *HeldJob) Runs(t testing.TB) int {
	t.Helper()
	runs, err := testenv.HookRuns(j.HostDir, j.job())
	if err != nil {
		t.Fatalf("fluxreal: counting the runs of Job %s: %v", j.job(), err)
	}
	return len(runs)
}
