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
		{Tool: "Argo CD", Version: "v3.6.1", Scenario: "fast hook Job", Controller: "operation Succeeded\nJob deleted by TTL",
			Syncmedic: "no finding", Test: "TestArgo/fast/v3", Passed: true},
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
