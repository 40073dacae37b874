package main

import (
	"strconv"

	"github.com/spf13/cobra"
)

// exitCodesAnnotation is the cobra.Command annotation holding a command's own exit codes for its --help; commands
// without one show exitCodesHelp.
const exitCodesAnnotation = "syncmedic/exit-codes"

// exitCodesHelp are the exit codes shared by every command (main.go's exit* constants).
const exitCodesHelp = `  0  done; for scan, nothing is stuck
  1  something is stuck (scan), or stuck-sync hazards are left (cmp)
  2  bad usage or unreadable input
  3  an action or a connection failed`

// addExitCodesHelp makes every command's --help end with its exit codes (completion and help included: the usage
// template is inherited).
func addExitCodesHelp(root *cobra.Command) {
	root.SetUsageTemplate(root.UsageTemplate() + `
Exit codes:
{{or (index .Annotations "` + exitCodesAnnotation + `") ` + strconv.Quote(exitCodesHelp) + `}}
`)
}
