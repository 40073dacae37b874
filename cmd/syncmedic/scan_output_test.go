package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
)

// TestScanWideOutput: -o wide gives the app and project their own columns and puts the evidence on the line.
func TestScanWideOutput(t *testing.T) {
	stuck := filepath.Join("..", "..", "examples", "stuck-cluster")
	code, out, errOut := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt, "-o", "wide", "--rule", "argocd/hook-finalizer-stuck")
	require.Equal(t, exitStuck, code, errOut)
	golden(t, "scan-stuck-wide.txt", out)
}

// TestEveryCommandsHelpListsItsExitCodes walks the whole command tree, cobra's completion and help included.
func TestEveryCommandsHelpListsItsExitCodes(t *testing.T) {
	root := newRootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	require.Greater(t, len(paths), 10, "the walk found too few commands: %v", paths)
	for _, p := range paths {
		t.Run(strings.Join(append([]string{"syncmedic"}, p...), " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, append(p, "--help")...)
			require.Equal(t, exitOK, code, errOut)
			i := strings.Index(out, "\nExit codes:\n")
			require.GreaterOrEqual(t, i, 0, "no exit codes in:\n%s", out)
			codes := out[i:]
			switch strings.Join(p, " ") {
			case "scan":
				require.Equal(t, "\nExit codes:\n  0  nothing is stuck\n  1  something is stuck\n"+
					"  2  bad usage or unreadable input (a dump with no Kubernetes object in it)\n"+
					"  3  a live source could not be reached or refused the scan\n", codes)
			case "fix":
				require.Equal(t, "\nExit codes:\n  0  done, or the live scan confirms a known finding is gone\n"+
					"  2  bad usage, an ID never seen, no automatic remedy, serve refused the fix (policy, conflict, rate limit),\n"+
					"     or --yes without --serve-url or --offline\n"+
					"  3  the action or a connection failed (serve not reachable included)\n", codes)
			default:
				require.Equal(t, "\nExit codes:\n"+exitCodesHelp+"\n", codes)
			}
		})
	}
}

// TestScanSaysWhenADumpIsOld: without --now, a dump whose newest timestamp is more than a day old is judged at the
// current time, and every output says so with the --now that judges it as it was; with --now, none does.
func TestScanSaysWhenADumpIsOld(t *testing.T) {
	stuck := filepath.Join("..", "..", "examples", "stuck-cluster")
	newest := time.Date(2025, 6, 10, 13, 58, 0, 0, time.UTC) // an Event's lastTimestamp in kustomizations.yaml
	message := func() string {
		return fmt.Sprintf("The newest timestamp in this dump is 2025-06-10T13:58:00Z (%d days ago): ages are judged at now; add --now 2025-06-10T14:00:00Z to judge them as they were",
			int(time.Since(newest)/(24*time.Hour)))
	}
	t.Run("table", func(t *testing.T) {
		code, out, errOut := runCLI(t, "scan", "--snapshot", stuck)
		require.Equal(t, exitStuck, code, errOut)
		require.Contains(t, out, "\n"+message()+".\n")
	})
	t.Run("wide", func(t *testing.T) {
		_, out, _ := runCLI(t, "scan", "--snapshot", stuck, "-o", "wide")
		require.Contains(t, out, "\n"+message()+".\n")
	})
	want := &syncmedic.OldDump{Newest: newest, Now: time.Date(2025, 6, 10, 14, 0, 0, 0, time.UTC)}
	t.Run("json", func(t *testing.T) {
		code, out, errOut := runCLI(t, "scan", "--snapshot", stuck, "-o", "json")
		require.Equal(t, exitStuck, code, errOut)
		var r syncmedic.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		want.Message = message()
		require.Equal(t, want, r.OldDump)
	})
	t.Run("yaml", func(t *testing.T) {
		code, out, errOut := runCLI(t, "scan", "--snapshot", stuck, "-o", "yaml")
		require.Equal(t, exitStuck, code, errOut)
		var r syncmedic.Report
		require.NoError(t, yaml.Unmarshal([]byte(out), &r))
		want.Message = message()
		require.Equal(t, want, r.OldDump)
	})
	t.Run("with --now, no notice", func(t *testing.T) {
		for _, o := range []string{"table", "json", "yaml"} {
			_, out, _ := runCLI(t, "scan", "--snapshot", stuck, "--now", judgedAt, "-o", o)
			require.NotContains(t, out, "newest timestamp", o)
			require.NotContains(t, out, "oldDump", o)
		}
	})
}
