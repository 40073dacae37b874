package syncmedic_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// The repository's own text files: its Markdown, and the code, scripts and manifests whose comments and messages
// refer to a section of a page.
var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenced    = regexp.MustCompile("(?ms)^```.*?^```")
	inline    = regexp.MustCompile("`[^`\n]*`")
	sectionOf = regexp.MustCompile(`\b((?:docs/[a-z-]+|bench/README|README)(?:\.md)?)(?:,|'s)? \\?"([^"\\]+)\\?"`)
	heading   = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	boldLead  = regexp.MustCompile(`(?m)\*\*([^*]+)\.\*\*`)
)

// repoTextFiles returns the repository's Markdown files and the other text files that may name a page's section,
// without bin/, node_modules and vendored upstream trees.
func repoTextFiles(t *testing.T) (md, other []string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "dist", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		switch ext := filepath.Ext(path); {
		case ext == ".md":
			md = append(md, path)
		case ext == ".go" || ext == ".sh" || ext == ".yaml" || ext == ".tpl" || ext == ".txt" || d.Name() == "Makefile":
			other = append(other, path)
		}
		return nil
	}))
	return md, other
}

// anchors returns the GitHub anchors of a Markdown page's headings.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fenced.ReplaceAllString(string(b), ""), -1) {
		slug := githubAnchor(m[1])
		for n := 1; out[slug]; n++ { // GitHub numbers a repeated heading's anchor
			slug = githubAnchor(m[1]) + "-" + string(rune('0'+n))
		}
		out[slug] = true
	}
	return out
}

// githubAnchor is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestEveryMarkdownLinkResolves: every relative link of the repository's Markdown names a file that exists, and its
// #anchor a heading of that page (or of the same page).
func TestEveryMarkdownLinkResolves(t *testing.T) {
	md, _ := repoTextFiles(t)
	require.Contains(t, md, "README.md")
	cache := map[string]map[string]bool{}
	for _, file := range md {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		text := inline.ReplaceAllString(fenced.ReplaceAllString(string(b), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which does not exist", file, target)
					continue
				}
			}
			if anchor == "" || filepath.Ext(resolved) != ".md" {
				continue
			}
			if cache[resolved] == nil {
				cache[resolved] = anchors(t, resolved)
			}
			if !cache[resolved][anchor] {
				t.Errorf("%s links to %s: %s has no heading with the anchor #%s", file, target, resolved, anchor)
			}
		}
	}
}

// TestEveryNamedSectionExists: a comment, message or page that sends the reader to `README, "Title"` or
// `docs/page.md, "Title"` (quotes escaped in a Go string or a template too) names a heading (or a bold lead,
// **Title.**) that page has.
func TestEveryNamedSectionExists(t *testing.T) {
	md, other := repoTextFiles(t)
	found := 0
	for _, file := range append(md, other...) {
		if file == "docs_links_test.go" { // its own comments show the forms
			continue
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range sectionOf.FindAllStringSubmatch(strings.Join(strings.Fields(string(b)), " "), -1) {
			page := m[1]
			if filepath.Ext(page) != ".md" {
				page += ".md"
			}
			target, err := os.ReadFile(page)
			if err != nil {
				t.Errorf("%s names %q of %s, which does not exist", file, m[2], m[1])
				continue
			}
			var titles []string
			for _, h := range heading.FindAllStringSubmatch(string(target), -1) {
				titles = append(titles, strings.ReplaceAll(h[1], "`", ""))
			}
			for _, h := range boldLead.FindAllStringSubmatch(string(target), -1) {
				titles = append(titles, h[1])
			}
			want := strings.ReplaceAll(m[2], "`", "")
			ok := false
			for _, title := range titles {
				ok = ok || strings.HasPrefix(title, want)
			}
			if !ok {
				t.Errorf("%s names the section %q of %s, which has no such heading: name one it has", file, m[2], page)
			}
			found++
		}
	}
	require.NotZero(t, found, "no section reference was checked")
}
