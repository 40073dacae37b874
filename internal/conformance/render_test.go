package conformance

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestRecordedRowsRenderAsOneTablePerToolInAStableOrder(t *testing.T) {
	dir := t.TempDir()
	rows := []Row{
		{Tool: "Flux", Version: "helm-controller v1.4.3", Scenario: "retries exhausted", Controller: "Stalled=True RetriesExceeded",
			Syncmedic: "flux/retries-exhausted | resetAt", Test: "TestFlux/retries", Passed: true},
		{Tool: "Flux", Version: "helm-controller v1.4.3", Scenario: "dependency not ready", Controller: "dependency '<ns>/db' is not ready",
			Syncmedic: "(test ended before observing)", Test: "TestFlux/dependency", Skipped: true},
		{Tool: "Argo CD", Version: "v3.6.1", Scenario: "fast hook Job", Controller: "operation Succeeded\nJob deleted by TTL",
			Syncmedic: "no finding", Test: "TestArgo/fast/v3", Passed: true, Kubelet: "real"},
		{Tool: "Argo CD", Version: "v2.14.21", Scenario: "fast hook Job", Controller: "operation Running for 3m",
			Syncmedic: "argocd/hook-completion-missed", Test: "TestArgo/fast/v2", Passed: false},
	}
	for _, r := range rows {
		require.NoError(t, write(dir, r))
	}
	loaded, err := Load(dir)
	require.NoError(t, err)
	require.ElementsMatch(t, rows, loaded, "every recorded row reads back as written")

	var got bytes.Buffer
	require.NoError(t, Render(&got, loaded, "make compat"))
	golden := filepath.Join("testdata", "compat.golden.md")
	if *update {
		require.NoError(t, os.WriteFile(golden, got.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got.String())
}

func TestRecordWritesNothingWhenNoDirectoryIsConfigured(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, "")
	t.Run("inner", func(t *testing.T) { Record(t, Row{Tool: "Argo CD", Version: "v1", Scenario: "s"}) })
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, files)

	t.Setenv(DirEnv, dir)
	t.Run("inner", func(t *testing.T) { Record(t, Row{Tool: "Argo CD", Version: "v1", Scenario: "s"}) })
	rows, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Passed)
	require.Equal(t, "TestRecordWritesNothingWhenNoDirectoryIsConfigured/inner#01", rows[0].Test)
}

// TestASkippedScenarioIsRecordedAsSkippedNotPassed fails on the code before issue 27, which marked every test that
// did not fail as passed.
func TestASkippedScenarioIsRecordedAsSkippedNotPassed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	t.Run("skipped", func(t *testing.T) {
		Record(t, Row{Tool: "Flux", Version: "v1", Scenario: "skipped scenario"})
		t.Skip("the rule did not fire")
	})
	t.Run("passed", func(t *testing.T) { Record(t, Row{Tool: "Flux", Version: "v1", Scenario: "passed scenario"}) })
	rows, err := Load(dir)
	require.NoError(t, err)
	results := map[string]string{}
	for _, r := range rows {
		results[r.Scenario] = r.Result()
	}
	require.Equal(t, map[string]string{"skipped scenario": "skipped", "passed scenario": "passed"}, results)

	var b bytes.Buffer
	require.NoError(t, Render(&b, rows, "make compat"))
	require.Contains(t, b.String(), "`TestASkippedScenarioIsRecordedAsSkippedNotPassed/skipped` **skipped**")
	err = Check(rows)
	require.ErrorContains(t, err, `Flux v1 "skipped scenario": skipped (TestASkippedScenarioIsRecordedAsSkippedNotPassed/skipped)`)
	require.NotContains(t, err.Error(), "passed scenario")
	require.ErrorContains(t, Check(nil), "no rows recorded")
}

func TestNormalizeReplacesWhatChangesFromRunToRun(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"testenv namespace and app names keep their test's part",
			"Application argocd-v2-14-21-4ebcbf/deleting-14cd0e is stuck",
			"Application argocd-v2-14-21-xxxxxx/deleting-xxxxxx is stuck"},
		{"a random suffix inside a longer name",
			`namespaces "ply-leaves-no-hook-holding-the-finalizer-89acdc-missing" not found`,
			`namespaces "ply-leaves-no-hook-holding-the-finalizer-xxxxxx-missing" not found`},
		{"an object dump cut by a truncated message, wherever the cut falls",
			`Job.batch "db-migrate" is invalid: spec.template: Invalid value: core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:"", GenerateName:"", Namespace:"", Sel… (hooks: db-migrate Failed)`,
			`Job.batch "db-migrate" is invalid: spec.template: Invalid value: core.PodTemplateSpec{… (hooks: db-migrate Failed)`},
		{"a random suffix cut short by a truncated message",
			"Job gets-one-incident-59c2… cannot", "Job gets-one-incident-xxxxxx… cannot"},
		{"measured durations", "has been deleting for 8s; (open for 0s); has waited 28s; it became Ready 5s later; took 1m30s; Ready 8s after its dependency",
			"has been deleting for Xs; (open for Xs); has waited Xs; it became Ready Xs later; took Xs; Ready Xs after its dependency"},
		{"configured durations stay", "no finding, no action within 20s (threshold 3s), checked every 30s, after 45s",
			"no finding, no action within 20s (threshold 3s), checked every 30s, after 45s"},
		{"temporary files", `error when patching "/dev/shm/1368815783": Job.batch`, `error when patching "/tmp/FILE": Job.batch`},
		{"timestamps and UIDs", "since 2026-11-23T21:57:42Z, uid 0f8e2a5c-1b2d-4c3e-9f00-123456789abc",
			"since TIMESTAMP, uid UID"},
		{"evaluation counts", "evaluated 44 times, its hooks read; the suspended release evaluated 17 times, its dependent 14 times; fails 3 times",
			"evaluated N times, its hooks read; the suspended release evaluated N times, its dependent N times; fails 3 times"},
		{"scan counts", "no finding until 35s after step 2's entry last changed: scanned 18 times, the ApplicationSet read each time",
			"no finding until 35s after step 2's entry last changed: scanned N times, the ApplicationSet read each time"},
		{"revisions and generateName hook names", "revisions [2d921daab3d21d03d0ed6cb0b4217261016dc673]: waiting for completion of hook batch/Job/clean-reports-239954b-presync-1795674691",
			"revisions [REVISION]: waiting for completion of hook batch/Job/clean-reports-REV-presync-STARTED"},
		{"Argo CD's time of day", "Retrying attempt #1 at 6:31AM. (hooks: report Running)", "Retrying attempt #1 at TIME. (hooks: report Running)"},
		{"words and versions are not names", "argocd/hook-finalizer-stuck on v3.6.1 held by audit.example.com/retain",
			"argocd/hook-finalizer-stuck on v3.6.1 held by audit.example.com/retain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Normalize(tt.in))
			require.Equal(t, tt.want, Normalize(tt.want), "normalising is idempotent")
		})
	}
}

// TestTwoRunsRecordTheSameMatrix records the same scenario twice with different random names, timestamps and
// durations, as two runs of `make test` do, and requires the same docs/compat.md from both. It fails on the code
// before issue 27, which recorded the texts as they were.
func TestTwoRunsRecordTheSameMatrix(t *testing.T) {
	render := func(suffix, at, took string) string {
		dir := t.TempDir()
		t.Setenv(DirEnv, dir)
		run := &endedTest{TB: t, name: "TestHeldHook/on_v3.6.1"}
		Record(run, Row{Tool: "Argo CD", Version: "v3.6.1", Scenario: "held hook",
			Controller: "operation Running since " + at + " in argocd-v3-6-1-" + suffix,
			Syncmedic:  "argocd/hook-not-deleted: Application argocd-v3-6-1-" + suffix + "/held-" + suffix + " has waited " + took})
		run.end()
		rows, err := Load(dir)
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, Render(&b, rows, "make compat"))
		return b.String()
	}
	first := render("4ebcbf", "2026-11-23T10:00:01Z", "28s")
	second := render("a7bbbf", "2026-11-24T11:02:03.5+01:00", "31.5s")
	require.Equal(t, first, second)
	require.Contains(t, first, "| operation Running since TIMESTAMP in argocd-v3-6-1-xxxxxx | "+
		"argocd/hook-not-deleted: Application argocd-v3-6-1-xxxxxx/held-xxxxxx has waited Xs | `TestHeldHook/on_v3.6.1` passed |")
}

// endedTest is a test of a given name that passed, whose cleanups run when end is called.
type endedTest struct {
	testing.TB
	name     string
	cleanups []func()
}

func (e *endedTest) Name() string     { return e.name }
func (e *endedTest) Helper()          {}
func (e *endedTest) Failed() bool     { return false }
func (e *endedTest) Skipped() bool    { return false }
func (e *endedTest) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }
func (e *endedTest) end() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
