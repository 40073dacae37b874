package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
)

func TestRulesListsTheCatalog(t *testing.T) {
	t.Run("the table lists every rule with its remedy and whether it runs unattended", func(t *testing.T) {
		code, out, errOut := runCLI(t, "rules")
		require.Equal(t, exitOK, code, errOut)
		golden(t, "rules.txt", out)
	})
	t.Run("json lists the whole catalog", func(t *testing.T) {
		code, out, _ := runCLI(t, "rules", "-o", "json")
		require.Equal(t, exitOK, code)
		var rules []syncmedic.Rule
		require.NoError(t, json.Unmarshal([]byte(out), &rules))
		require.Equal(t, syncmedic.Rules(), rules)
	})
	t.Run("an unknown format is a usage error", func(t *testing.T) {
		code, _, errOut := runCLI(t, "rules", "-o", "xml")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errOut, "want table, json or yaml")
	})
}

// TestCatalogSaysWhatTheRemediesDo checks, on every finding of the stuck example (which fires every rule), that the
// catalog's Automatic column tells the truth about the remedy the rule really produced.
func TestCatalogSaysWhatTheRemediesDo(t *testing.T) {
	_, out, _ := runCLI(t, "scan", "--snapshot", filepath.Join("..", "..", "examples", "stuck-cluster"), "--now", judgedAt, "-o", "json")
	var r syncmedic.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.NotEmpty(t, r.Findings)
	for _, f := range r.Findings {
		rule, ok := syncmedic.LookupRule(f.Rule)
		require.True(t, ok)
		t.Run(string(f.Rule)+" on "+f.Object.String()+" does what the catalog says", func(t *testing.T) {
			switch rule.Automatic {
			case syncmedic.AutoSafe:
				require.True(t, f.Remedy.AutoSafe)
				require.False(t, f.Remedy.RerunsHooks)
			case syncmedic.AutoWithRerunHooks:
				require.True(t, f.Remedy.AutoSafe)
				require.True(t, f.Remedy.RerunsHooks)
			case syncmedic.AutoNever:
				require.False(t, f.Remedy.AutoSafe)
				if f.Remedy.Action == syncmedic.ActionNone {
					// A proposed-only rule may offer nothing on a finding whose action could not work (the
					// artifact-GC finalizer of a workflow with no garbage-collection Pod): the remedy says so.
					require.Contains(t, f.Remedy.Description, "syncmedic applies nothing", "a finding without the rule's action says why")
				}
			case syncmedic.AutoNone:
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action)
			default:
				t.Fatalf("rule %s has no Automatic value", rule.ID)
			}
			if f.Remedy.Action != syncmedic.ActionNone {
				require.Contains(t, rule.Actions, f.Remedy.Action, "the catalog lists the action the rule proposes")
			}
		})
	}
}
