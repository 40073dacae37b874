package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ and the generated sections of docs/ (make docs)")

// judgedAt is a fixed instant so ages in the golden output do not move.
const judgedAt = "2025-06-10T14:00:00Z"

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./cmd/syncmedic -update` to create %s", path)
	require.Equal(t, string(want), got)
}

func TestScanSnapshot(t *testing.T) {
	stuck := filepath.Join("..", "..", "examples", "stuck-cluster")
	healthy := filepath.Join("..", "..", "examples", "healthy-cluster")

	t.Run("the stuck example prints one table line per stuck object and exits 1", func(t *testing.T) {
		code, out, errOut := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt)
		require.Equal(t, exitStuck, code, errOut)
		golden(t, "scan-stuck.txt", out)
	})
	t.Run("the stuck example reports every rule of the catalog with evidence and a remedy", func(t *testing.T) {
		code, out, _ := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt, "-o", "json")
		require.Equal(t, exitStuck, code)
		var r syncmedic.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		seen := map[syncmedic.RuleID]bool{}
		for _, f := range r.Findings {
			seen[f.Rule] = true
			require.NotEmpty(t, f.Evidence, "finding %s on %s has no evidence", f.Rule, f.Object)
			require.NotEmpty(t, f.Remedy.Description, "finding %s on %s has no remedy", f.Rule, f.Object)
			require.NotEmpty(t, f.Fingerprint)
		}
		for _, rule := range syncmedic.Rules() {
			require.True(t, seen[rule.ID], "rule %s is not reported", rule.ID)
		}
	})
	t.Run("every finding with an automatic remedy carries its exact fix command in json, and exits 1", func(t *testing.T) {
		code, out, _ := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt, "-o", "json")
		require.Equal(t, exitStuck, code)
		var r struct {
			Findings []struct {
				syncmedic.Finding
				Fix string `json:"fix"`
			} `json:"findings"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		withRemedy := 0
		for _, f := range r.Findings {
			if f.Remedy.Action == syncmedic.ActionNone {
				require.Empty(t, f.Fix, "%s only notifies: `syncmedic fix` would refuse it", f.Rule)
				continue
			}
			withRemedy++
			require.Equal(t, "syncmedic fix "+f.Fingerprint, f.Fix, "finding %s on %s", f.Rule, f.Object)
		}
		require.NotZero(t, withRemedy, "the stuck example has findings with automatic remedies")
	})
	t.Run("a rule filter keeps only that rule, in yaml", func(t *testing.T) {
		code, out, _ := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt, "-o", "yaml", "--rule", "argocd/hook-finalizer-stuck")
		require.Equal(t, exitStuck, code)
		golden(t, "scan-stuck-hook-finalizer.yaml", out)
	})
	t.Run("the healthy example reports nothing and exits 0", func(t *testing.T) {
		code, out, errOut := runCLI(t, "scan", "--snapshot", healthy, "--now", judgedAt)
		require.Equal(t, exitOK, code, errOut)
		golden(t, "scan-healthy.txt", out)
		require.Contains(t, out, "No stuck syncs found.\nRead snapshot ", "an all-clear says what it covers")
	})
	t.Run("the output format can come from the environment", func(t *testing.T) {
		t.Setenv("SYNCMEDIC_OUTPUT", "json")
		code, out, _ := runCLI(t, "scan", "--snapshot", healthy, "--now", judgedAt)
		require.Equal(t, exitOK, code)
		require.Contains(t, out, `"findings": []`)
	})
}

func TestScanUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown rule is refused with a pointer to the catalog", []string{"scan", "--snapshot", ".", "--rule", "argocd/nope"}, "unknown rule"},
		{"an unknown output format is refused", []string{"scan", "--snapshot", ".", "-o", "xml"}, "want table, wide, json or yaml"},
		{"a bad --now is refused with an example", []string{"scan", "--snapshot", ".", "--now", "yesterday"}, "RFC3339"},
		{"nothing to scan says what to give", []string{"scan"}, "nothing to scan"},
		{"a missing snapshot path is an input error", []string{"scan", "--snapshot", filepath.Join(os.TempDir(), "syncmedic-does-not-exist")}, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			isolateCLIConfig(t) // no kubeconfig or argocd login of the machine is read
			code, _, errOut := runCLI(t, c.args...)
			require.Equal(t, exitUsage, code)
			require.Contains(t, errOut, c.want)
		})
	}
}

// TestScanNeverGivesAnAllClearForNothingRead: an input with no Kubernetes object in it is an input error (exit 2),
// never "No stuck syncs found"; a dump saved as .txt inside a directory is read, other text files are skipped.
func TestScanNeverGivesAnAllClearForNothingRead(t *testing.T) {
	dir := func(t *testing.T, files map[string]string) string {
		d := t.TempDir()
		for name, content := range files {
			require.NoError(t, os.WriteFile(filepath.Join(d, name), []byte(content), 0o644))
		}
		return d
	}
	const jobDump = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: Job\n  metadata: {name: a, namespace: b}\n"
	tests := []struct {
		name  string
		files map[string]string
		code  int
		want  string
	}{
		{name: "an empty directory is an input error", files: map[string]string{}, code: exitUsage, want: "nothing was checked"},
		{name: "a file of garbage is an input error that quotes the problem", files: map[string]string{"dump.yaml": "{{{ not yaml"},
			code: exitUsage, want: "no usable Kubernetes object in it"},
		{name: "a README beside nothing else is not a dump", files: map[string]string{"README.txt": "how I made this dump"}, code: exitUsage,
			want: "nothing was checked"},
		{name: "a dump saved as .txt in a directory is read and counted", files: map[string]string{"jobs.txt": jobDump, "notes.log": "kubectl said ok"},
			code: exitOK, want: "1 objects: 1 Job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "scan", "--snapshot", dir(t, tt.files), "--now", judgedAt)
			require.Equal(t, tt.code, code, out+errOut)
			require.Contains(t, out+errOut, tt.want)
			if tt.code != exitOK {
				require.NotContains(t, out, "No stuck syncs found")
			}
		})
	}
}

// TestScanParseErrorsNameTheLineOnce: a YAML syntax error is reported as file:line: message, with the line of the
// file once (not again as the parser's "line N", which counts from the start of the document).
func TestScanParseErrorsNameTheLineOnce(t *testing.T) {
	const job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: b}\n"
	tests := []struct {
		name  string
		files map[string]string
		code  int
		want  string
	}{
		{name: "a file whose only object breaks on line 3 is an input error naming line 3 once, exit 2",
			files: map[string]string{"bad.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: a\n  namespace: b\n"},
			code:  exitUsage, want: "bad.yaml:3: did not find expected ',' or '}'"},
		{name: "a broken document beside a good one is listed as a problem naming line 5 once, exit 0 for the good one",
			files: map[string]string{"jobs.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\n   bad: indent\n---\n" + job},
			code:  exitOK, want: "jobs.yaml:5: mapping values are not allowed in this context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for name, content := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(d, name), []byte(content), 0o644))
			}
			code, out, errOut := runCLI(t, "scan", "--snapshot", d, "--now", judgedAt)
			require.Equal(t, tt.code, code, out+errOut)
			require.Contains(t, out+errOut, tt.want)
			require.NotRegexp(t, `line \d+`, out+errOut, "the line is named once, as file:line")
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "syncmedic "+syncmedic.Version)
}

func TestScanLiveConnectionFailureIsExit3(t *testing.T) {
	code, _, errOut := runCLI(t, "scan", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext")
	require.Equal(t, exitFailed, code, "an unreachable Argo CD is a failure, not a usage error")
	require.Contains(t, errOut, "127.0.0.1:1")
}
