package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/bench/internal/benchcheck"
	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
)

// TestReadmeQuotesOnlyFiguresAResultFileHolds fails when bench/README.md quotes a figure that no file of
// bench/results holds, when it links a result file that does not exist or leaves one unquoted, when a result file
// lacks its machine, date or commit, and when README refers to a file outside the repository. Figures are the
// numbers of README's tables and, in its prose, numbers with a decimal point or a unit (ms, MB, %, packages...);
// targets (after ≤, ≥, =), issue numbers, dates, versions and code spans are not figures.
func TestReadmeQuotesOnlyFiguresAResultFileHolds(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join("results", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "bench/results holds the tools' result files")

	var contents []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var r benchutil.Result
		require.NoError(t, json.Unmarshal(data, &r), f)
		require.NotEmpty(t, r.Tool, "%s: tool", f)
		require.NotEmpty(t, r.Date, "%s: date", f)
		require.NotEmpty(t, r.Commit, "%s: commit", f)
		require.Positive(t, r.Machine.NProc, "%s: machine.nproc", f)
		require.NotEmpty(t, r.Machine.CPUModel, "%s: machine.cpu_model", f)
		require.NotEmpty(t, r.Figures, "%s: figures", f)
		if r.Source != "" {
			require.True(t, strings.HasPrefix(r.Source, "transcribed from the run of "), "%s: source %q", f, r.Source)
		}
		contents = append(contents, string(data))
		require.Contains(t, string(readme), "results/"+filepath.Base(f), "README quotes %s", f)
	}
	for _, m := range resultLink.FindAllStringSubmatch(string(readme), -1) {
		_, err := os.Stat(filepath.Join("results", m[1]))
		require.NoError(t, err, "README links results/%s", m[1])
	}
	require.Empty(t, outsidePath.FindAllString(string(readme), -1), "README refers to files outside the repository")

	require.Empty(t, unheld(string(readme), contents), "bench/README.md quotes figures no file of bench/results holds")
}

// unheld returns the figures doc quotes that none of results holds (as any number of the file, "10s" too).
func unheld(doc string, results []string) []string {
	held := map[string]bool{}
	for _, r := range results {
		for _, tok := range number.FindAllString(r, -1) {
			held[strings.ReplaceAll(strings.TrimRight(tok, ","), ",", "")] = true
		}
	}
	var out []string
	for _, f := range figures(doc) {
		if !held[f.norm] {
			out = append(out, f.String())
		}
	}
	return out
}

func TestAFigureNoResultFileHoldsIsReported(t *testing.T) {
	result := `{"figures": [{"name": "receiver/baseline throughput ratio", "value": "0.88"}, {"name": "p99", "value": "3.55 ms"},
		{"name": "binary", "value": "141,738,768 bytes"}], "command": "go run ./bench/announce -threshold 10s"}`
	doc := "The ratio was **0.88** (p99 3.55 ms), the binary 141,738,768 bytes; reads time out after 10 s.\n" +
		"Typed by hand: 0.91, and 12 ms.\n\n| | ratio |\n|---|---|\n| after | 0.88, 0.87 |\n"
	require.Equal(t, []string{"line 2: 0.91 (Typed by hand: 0.91, and 12 ms.)", "line 2: 12 (Typed by hand: 0.91, and 12 ms.)",
		"line 6: 0.87 (| after | 0.88, 0.87 |)"}, unheld(doc, []string{result}))
}

func TestFiguresAreTheNumbersOfTablesAndMeasuredProse(t *testing.T) {
	doc := "Intro: run `go run ./bench/receiverload -n 20000` on v3.6.1 (go1.26.8, issue 16 item 3, #24187), 2026-11-23 22:08.\n" +
		"The ratio was **0.88**, CPU 1.15 to 1.19 ×, p99 12 ms, 186 MB and 1,545 packages; target ≥ 0.60, ≤ 200 MB, N = 0, 10 s timeout, 2 CPUs.\n" +
		"\n| | packages | binary |\n|---|---|---|\n| before | 1,697 | 150,329,704 bytes |\n" +
		"```sh\ngo run ./bench/announce -healthy 2000 # 0.99\n```\n<!-- 7.77 -->\n"
	var got []string
	for _, f := range figures(doc) {
		got = append(got, f.norm)
	}
	require.Equal(t, []string{"0.88", "1.15", "1.19", "12", "186", "1545", "10", "1697", "150329704"}, got,
		"a setting with a unit (10 s) counts too: the result file holds it in its command or notes")
}

// figure is a number README quotes, where.
type figure struct {
	line, col int    // 1-based line; byte offset in it
	text      string // as written
	norm      string // without thousands separators
	context   string
}

func (f figure) String() string {
	return "line " + strconv.Itoa(f.line) + ": " + f.text + " (" + f.context + ")"
}

var (
	fence       = regexp.MustCompile("(?ms)^```.*?^```[^\\n]*$")
	codeSpan    = regexp.MustCompile("`[^`\\n]*`")
	htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	dateOrTime  = regexp.MustCompile(`\b\d{4}-\d\d-\d\d\b|\b\d\d:\d\d(?::\d\d)?\b`)
	number      = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)
	resultLink  = regexp.MustCompile(`results/([A-Za-z0-9._-]+\.json)`)
	outsidePath = regexp.MustCompile("(?:^|[\\s(`'\"])(?:/tmp|/home|/root|/work|/var|/Users|~)/[^\\s)`'\"]*")
	// measured is what makes a number of prose a figure: the unit after it.
	measured = regexp.MustCompile(`^[  ]?(?:ms|µs|ns|s|min|minutes|MB|KB|GB|B|bytes|req/s|%|×|packages|modules|calls)(?:[^A-Za-z]|$)`)
	// notFigure is what before a number makes it a target, a reference or a setting rather than a figure.
	notFigure = regexp.MustCompile(`(?:≤|≥|=|<|>|issue|item|#|issues)[  ]?$`)
)

// blank replaces the matches of re in s by spaces, keeping line numbers and offsets.
func blank(s string, re *regexp.Regexp) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, m)
	})
}

// numbers returns the numbers of s standing on their own (not part of a word, a version or an identifier).
func numbers(s string) []figure {
	var out []figure
	for _, loc := range number.FindAllStringIndex(s, -1) {
		start, end := loc[0], loc[1]
		for end > start && s[end-1] == ',' {
			end--
		}
		if start > 0 {
			r, _ := utf8.DecodeLastRuneInString(s[:start])
			if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-/#:", r) {
				continue
			}
		}
		if end < len(s) {
			r, _ := utf8.DecodeRuneInString(s[end:])
			if unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' {
				continue
			}
		}
		text := s[start:end]
		out = append(out, figure{text: text, norm: strings.ReplaceAll(text, ",", ""), line: strings.Count(s[:start], "\n") + 1,
			col: start - strings.LastIndex(s[:start], "\n") - 1})
	}
	return out
}

// figures returns the figures doc quotes, in order.
func figures(doc string) []figure {
	for _, re := range []*regexp.Regexp{fence, htmlComment, codeSpan, dateOrTime} {
		doc = blank(doc, re)
	}
	lines := strings.Split(doc, "\n")
	isSeparator := func(i int) bool {
		return i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|-") ||
			i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|:")
	}
	var out []figure
	for i, line := range lines {
		table := strings.HasPrefix(strings.TrimSpace(line), "|")
		if table && (isSeparator(i) || isSeparator(i+1)) {
			continue // a table's header and separator
		}
		for _, f := range numbers(line) {
			before, after := line[:f.col], line[f.col+len(f.text):]
			if notFigure.MatchString(before) {
				continue
			}
			if !table && !strings.Contains(f.text, ".") && !measured.MatchString(after) {
				continue
			}
			f.line, f.context = i+1, strings.TrimSpace(line)
			if len(f.context) > 100 {
				f.context = f.context[:100] + "…"
			}
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// TestReadmeShowsTheNewestBenchCheck fails when bench/README.md's bench-check section is not the one `make
// bench-check` generates from the newest results/check-*.json.
func TestReadmeShowsTheNewestBenchCheck(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	path, r, err := benchcheck.Newest("results")
	require.NoError(t, err)
	want, err := benchcheck.ReplaceSection(string(readme), benchcheck.Section(filepath.Base(path), r))
	require.NoError(t, err)
	require.Equal(t, want, string(readme), "run make bench-check (or go run ./bench/check) to regenerate the section from %s", path)
}
