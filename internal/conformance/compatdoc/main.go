// Command compatdoc renders docs/compat.md from the rows the real-controller tests recorded (see package conformance).
// It fails when there are no rows, leaving the file as it is; and, after writing the file (which says so), when a
// row was skipped or failed, or when a test of the previous matrix recorded no row this time (a scenario that skipped
// before recording), naming those rows.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/syncmedic/syncmedic/internal/conformance"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is compatdoc with its arguments; it returns the exit code: 0 when every row passed, 1 when a row did not or
// none was recorded, 2 on a usage or I/O error.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("compatdoc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "bin/compat", "directory of recorded rows (the tests' "+conformance.DirEnv+")")
	out := fs.String("out", "docs/compat.md", "Markdown file to write")
	extra := fs.String("extra", "", "Markdown file appended as it is (the versions that do not build)")
	allowMissing := fs.Bool("allow-missing", false, "do not fail when a test of the previous -out recorded no row (a scenario removed or renamed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rows, err := conformance.Load(*in)
	if err != nil {
		fmt.Fprintf(stderr, "compatdoc: %v\n", err)
		return 2
	}
	if len(rows) == 0 {
		// A run that skipped the real-controller tests (for example -short) proves nothing: fail, and leave the
		// published matrix alone rather than wipe it.
		fmt.Fprintf(stderr, "compatdoc: %v; %s left as it is\n", conformance.Check(rows), *out)
		return 1
	}
	var missing []string
	if old, err := os.ReadFile(*out); err == nil && !*allowMissing {
		missing = conformance.MissingTests(old, rows)
	}
	var buf bytes.Buffer
	if err := conformance.Render(&buf, rows, "make compat"); err != nil {
		fmt.Fprintf(stderr, "compatdoc: %v\n", err)
		return 2
	}
	if *extra != "" {
		b, err := os.ReadFile(*extra)
		if err != nil {
			fmt.Fprintf(stderr, "compatdoc: %v\n", err)
			return 2
		}
		buf.WriteString("\n")
		buf.Write(b)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "compatdoc: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "compatdoc: %d rows written to %s\n", len(rows), *out)
	code := 0
	if err := conformance.Check(rows); err != nil {
		fmt.Fprintf(stderr, "compatdoc: %v\n", err)
		code = 1
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "compatdoc: %d tests of the previous %s recorded no row (skipped before recording?; -allow-missing "+
			"if they were removed or renamed):\n\t%s\n", len(missing), *out, strings.Join(missing, "\n\t"))
		code = 1
	}
	return code
}
