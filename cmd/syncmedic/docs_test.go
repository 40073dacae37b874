package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/docgen"
)

// TestGeneratedDocs keeps the generated references true: docs/cli.md lists every flag of every command as cobra
// has it, and docs/rules.md's catalog table is the catalog's. A page that differs fails `make test`; `make docs`
// (-update) rewrites it.
func TestGeneratedDocs(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	for _, tc := range []struct{ file, section, body string }{
		{"cli.md", "flags", flagsReference(newRootCommand())},
		{"rules.md", "rules", rulesTable(syncmedic.Rules())},
	} {
		t.Run(tc.file+" "+tc.section, func(t *testing.T) {
			require.NoError(t, docgen.Sync(filepath.Join(docs, tc.file), tc.section, tc.body, *update))
		})
	}
}

// TestFlagsReferenceNamesEveryFlag: the generated reference has a row for each flag of each command (what
// TestReadmeNamesEveryFlag asked of the README), with its environment variable, default and usage.
func TestFlagsReferenceNamesEveryFlag(t *testing.T) {
	root := newRootCommand()
	ref := flagsReference(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			require.Contains(t, ref, "| `--"+f.Name+"`", "%s --%s", c.CommandPath(), f.Name)
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	scan, _, err := root.Find([]string{"scan"})
	require.NoError(t, err)
	f := scan.Flags().Lookup("output")
	require.Contains(t, ref, "| `--output`, `-o` | `SYNCMEDIC_OUTPUT` | `"+f.DefValue+"` | "+usageWithoutEnv(f)+" |")
}

// flagsReference renders, for each command (help and hidden ones left out; completion, which cobra adds when the
// command runs, included), its short description and a table of its flags: name, environment variable, default,
// usage.
func flagsReference(root *cobra.Command) string {
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		var rows [][]string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" || f.Hidden {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name += ", `-" + f.Shorthand + "`"
			}
			env := ""
			if strings.Contains(f.Usage, "[$"+envName(f.Name)+"]") {
				env = docgen.Code(envName(f.Name))
			}
			rows = append(rows, []string{name, env, flagDefault(f), usageWithoutEnv(f)})
		})
		fmt.Fprintf(&b, "### `%s`\n\n%s.\n\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
		if len(rows) == 0 {
			b.WriteString("No flags.\n\n")
		} else {
			b.WriteString(docgen.Table([]string{"flag", "environment", "default", "meaning"}, rows) + "\n")
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}

// flagDefault is the flag's default as --help shows it, or nothing for an empty one.
func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "[]", "0s":
		if f.Value.Type() == "duration" && f.DefValue == "0s" {
			return "`0s`"
		}
		return ""
	}
	return docgen.Code(f.DefValue)
}

// usageWithoutEnv is the flag's usage without the "[$SYNCMEDIC_X]" documentEnv appends (the table has a column).
func usageWithoutEnv(f *pflag.Flag) string {
	return strings.TrimSuffix(f.Usage, " [$"+envName(f.Name)+"]")
}

// rulesTable renders the catalog, as `syncmedic rules` lists it, each rule linked to its section of docs/rules.md.
func rulesTable(rules []syncmedic.Rule) string {
	var rows [][]string
	for _, r := range rules {
		remedy := "none"
		if len(r.Actions) > 0 {
			parts := make([]string, len(r.Actions))
			for i, a := range r.Actions {
				parts[i] = docgen.Code(string(a))
			}
			remedy = strings.Join(parts, ", ")
		}
		rows = append(rows, []string{"[" + string(r.ID) + "](#" + r.Anchor() + ")", r.Title, r.Severity.String(),
			threshold(r.Threshold), remedy, string(r.Automatic)})
	}
	return docgen.Table([]string{"rule", "what is stuck", "severity", "default threshold", "remedy", "applied unattended (policy `auto`)"}, rows)
}

// TestHandWrittenFlagTablesNameOnlyRealFlags: a row of a hand-written flag table in docs/ (its first cell naming
// `--flag`) is about a flag some command has, so that a renamed or removed flag does not live on in the prose
// around the generated reference.
func TestHandWrittenFlagTablesNameOnlyRealFlags(t *testing.T) {
	root := newRootCommand()
	root.InitDefaultCompletionCmd()
	flags := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	flagName := regexp.MustCompile("`-?-?[a-z]?,? ?--([a-z0-9-]+)")
	rows := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
				continue
			}
			for _, m := range flagName.FindAllStringSubmatch(cells[1], -1) {
				rows++
				require.True(t, flags[m[1]], "%s:%d documents --%s, which no command has: rename or remove the row", page, i+1, m[1])
			}
		}
	}
	require.NotZero(t, rows, "no flag table row was read")
}
