package docgen

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// Begin and End delimit the generated section name of a page; the text around them is written by hand.
func Begin(name string) string { return "<!-- BEGIN GENERATED: " + name + " -->" }

// End closes the section Begin(name) opens.
func End(name string) string { return "<!-- END GENERATED: " + name + " (make docs) -->" }

// Replace returns page with the body of its generated section name replaced by body. It fails when the page lacks
// the markers, has them more than once, or in the wrong order.
func Replace(page []byte, name, body string) ([]byte, error) {
	begin, end := []byte(Begin(name)+"\n"), []byte(End(name))
	if n := bytes.Count(page, begin); n != 1 {
		return nil, fmt.Errorf("%d lines %q, want exactly one: put %q and %q around the generated section", n, Begin(name), Begin(name), End(name))
	}
	if n := bytes.Count(page, end); n != 1 {
		return nil, fmt.Errorf("%d markers %q, want exactly one after %q", n, End(name), Begin(name))
	}
	i := bytes.Index(page, begin) + len(begin)
	j := bytes.Index(page, end)
	if j < i {
		return nil, fmt.Errorf("%q comes before %q: swap them", End(name), Begin(name))
	}
	body = strings.TrimRight(body, "\n") + "\n"
	out := make([]byte, 0, len(page)+len(body))
	out = append(out, page[:i]...)
	out = append(out, body...)
	return append(out, page[j:]...), nil
}

// Sync makes the generated section name of the file path hold body: with update it rewrites the file; without, it
// fails when the committed section differs, naming the first line that differs and `make docs`, the fix.
func Sync(path, name, body string, update bool) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want, err := Replace(page, name, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(page, want) {
		return nil
	}
	if update {
		return os.WriteFile(path, want, 0o644)
	}
	return fmt.Errorf("%s: the generated section %q is not what the code generates (%s): run `make docs` and commit %s",
		path, name, firstDifference(page, want), path)
}

// firstDifference names the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, the code generates %q", i+1, gl, wl)
		}
	}
	return "they differ"
}

// Table renders a Markdown table; a | in a cell is escaped and a newline becomes a space.
func Table(header []string, rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			c = strings.ReplaceAll(strings.ReplaceAll(c, "\n", " "), "|", `\|`)
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	b.WriteString("|" + strings.Join(sep, "|") + "|\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// Code quotes s as Markdown inline code, or returns "" for an empty s.
func Code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}
