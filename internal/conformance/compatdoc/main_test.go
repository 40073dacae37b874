package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/conformance"
)

func TestCompatdocFailsUnlessEveryRecordedRowPassed(t *testing.T) {
	passed := conformance.Row{Tool: "Argo CD", Version: "v3.6.1", Scenario: "fast hook", Controller: "Succeeded",
		Syncmedic: "no finding", Test: "TestFast/v3", Passed: true}
	skipped := conformance.Row{Tool: "Flux", Version: "helm-controller v1.4.3", Scenario: "retries exhausted",
		Controller: "(test ended before observing)", Syncmedic: "(test ended before observing)", Test: "TestRetries", Skipped: true}
	failed := conformance.Row{Tool: "Argo CD", Version: "v2.14.21", Scenario: "fast hook", Controller: "Running",
		Syncmedic: "nothing", Test: "TestFast/v2"}
	tests := []struct {
		name      string
		rows      []conformance.Row
		wantCode  int
		wantErr   []string // in stderr
		wantWrite bool     // whether the output file is (re)written
	}{
		{name: "every row passed", rows: []conformance.Row{passed}, wantCode: 0, wantWrite: true},
		{name: "a skipped row fails, named, and the matrix says skipped", rows: []conformance.Row{passed, skipped},
			wantCode: 1, wantErr: []string{"1 of 2", `Flux helm-controller v1.4.3 "retries exhausted": skipped (TestRetries)`}, wantWrite: true},
		{name: "a failed row fails, named", rows: []conformance.Row{passed, failed},
			wantCode: 1, wantErr: []string{`Argo CD v2.14.21 "fast hook": FAILED (TestFast/v2)`}, wantWrite: true},
		{name: "no rows fails and leaves the old file", rows: nil, wantCode: 1, wantErr: []string{"no rows recorded", "left as it is"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, out := t.TempDir(), filepath.Join(t.TempDir(), "compat.md")
			require.NoError(t, os.WriteFile(out, []byte("old matrix\n"), 0o644))
			for i, r := range tt.rows {
				data, err := json.Marshal(r)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(in, string(rune('a'+i))+".json"), data, 0o644))
			}
			var stderr bytes.Buffer
			code := run([]string{"-in", in, "-out", out}, &stderr)
			require.Equal(t, tt.wantCode, code, stderr.String())
			for _, s := range tt.wantErr {
				require.Contains(t, stderr.String(), s)
			}
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			if !tt.wantWrite {
				require.Equal(t, "old matrix\n", string(got))
				return
			}
			require.Contains(t, string(got), "# Compatibility matrix")
			for _, r := range tt.rows {
				require.Contains(t, string(got), "`"+r.Test+"` ", "every row is in the matrix")
			}
			if tt.rows[len(tt.rows)-1].Skipped {
				require.Contains(t, string(got), "`TestRetries` **skipped**")
				require.NotContains(t, string(got), "`TestRetries` passed")
			}
		})
	}
}

// TestCompatdocFailsWhenATestOfThePreviousMatrixRecordedNothing: a scenario that skips before it records its row
// leaves no row at all; the previous docs/compat.md names it, so compatdoc still notices.
func TestCompatdocFailsWhenATestOfThePreviousMatrixRecordedNothing(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "compat.md")
	both := []conformance.Row{
		{Tool: "Argo CD", Version: "v3.6.1", Scenario: "a", Test: "TestA", Passed: true},
		{Tool: "Flux", Version: "v1.4.3", Scenario: "b", Test: "TestB/sub", Passed: true},
	}
	var old bytes.Buffer
	require.NoError(t, conformance.Render(&old, both, "make compat"))
	require.NoError(t, os.WriteFile(out, old.Bytes(), 0o644))
	data, err := json.Marshal(both[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(in, "a.json"), data, 0o644))

	var stderr bytes.Buffer
	require.Equal(t, 1, run([]string{"-in", in, "-out", out}, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "1 tests of the previous "+out+" recorded no row")
	require.Contains(t, stderr.String(), "\tTestB/sub")

	stderr.Reset()
	require.Equal(t, 0, run([]string{"-in", in, "-out", out, "-allow-missing"}, &stderr), stderr.String())
}

// TestTheCommittedMatrixNamesItsTests keeps MissingTests in step with the rendered format: every row of
// docs/compat.md is found.
func TestTheCommittedMatrixNamesItsTests(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "compat.md"))
	require.NoError(t, err)
	rows := 0
	for _, line := range bytes.Split(old, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("| ")) && bytes.Contains(line, []byte("| `Test")) {
			rows++
		}
	}
	require.NotZero(t, rows)
	require.Len(t, conformance.MissingTests(old, nil), rows)
}
