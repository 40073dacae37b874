// Command compatdoc renders docs/compat.md from the rows the real-controller tests recorded (see package conformance).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/syncmedic/syncmedic/internal/conformance"
)

func main() {
	in := flag.String("in", "bin/compat", "directory of recorded rows (the tests' "+conformance.DirEnv+")")
	out := flag.String("out", "docs/compat.md", "Markdown file to write")
	extra := flag.String("extra", "", "Markdown file appended as it is (the versions that do not build)")
	flag.Parse()
	rows, err := conformance.Load(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compatdoc: %v\n", err)
		os.Exit(2)
	}
	if len(rows) == 0 {
		// A run that skipped the real-controller tests (for example -short) must not wipe the matrix.
		fmt.Fprintf(os.Stderr, "compatdoc: no rows in %s; %s left as it is\n", *in, *out)
		return
	}
	var buf bytes.Buffer
	if err := conformance.Render(&buf, rows, "make compat"); err != nil {
		fmt.Fprintf(os.Stderr, "compatdoc: %v\n", err)
		os.Exit(2)
	}
	if *extra != "" {
		b, err := os.ReadFile(*extra)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compatdoc: %v\n", err)
			os.Exit(2)
		}
		buf.WriteString("\n")
		buf.Write(b)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "compatdoc: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "compatdoc: %d rows written to %s\n", len(rows), *out)
}
