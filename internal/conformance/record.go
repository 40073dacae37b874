package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// DirEnv names the directory the rows are written to; `make test` sets it to bin/compat. Unset, Record does nothing,
// so a plain `go test` of one package leaves no files behind.
const DirEnv = "SYNCMEDIC_COMPAT_DIR"

// Row is one cell of the compatibility matrix: a scenario run on one version of one tool.
type Row struct {
	// Tool is "Argo CD" or "Flux".
	Tool string `json:"tool"`
	// Version is the controller version the scenario ran on, e.g. "v3.6.1" or "helm-controller v1.4.3".
	Version string `json:"version"`
	// Scenario is the scenario's short name, e.g. "fast hook Job (ttlSecondsAfterFinished: 0)".
	Scenario string `json:"scenario"`
	// Controller is what the real controller did, as the test observed it (phase, message, finalizers...).
	Controller string `json:"controller"`
	// Syncmedic is what syncmedic reported and did: rule IDs and remedy outcome, or "no finding" for a near miss.
	Syncmedic string `json:"syncmedic"`
	// Kubelet is "real" when the scenario's Pods ran on the real node (testenv.RealNode: containers under a kubelet,
	// containerd and runc); empty when the test played the kubelet (testenv.Env.Kubelet). The matrix shows it after
	// the scenario.
	Kubelet string `json:"kubelet,omitempty"`
	// Test is the name of the test that produced the row; Passed says whether it passed, Skipped whether it was
	// skipped (a skipped row is never passed: it proved nothing).
	Test    string `json:"test"`
	Passed  bool   `json:"passed"`
	Skipped bool   `json:"skipped,omitempty"`
}

// Result is the row's outcome as the matrix prints it: "passed", "skipped" or "FAILED".
func (r Row) Result() string {
	switch {
	case r.Skipped:
		return "skipped"
	case r.Passed:
		return "passed"
	}
	return "FAILED"
}

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Record writes r when the test ends, marked with whether the test passed or was skipped, its texts normalised
// (Normalize) so the matrix is the same from run to run. Nothing is written when DirEnv is unset.
func Record(t testing.TB, r Row) {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return
	}
	r.Test = t.Name()
	t.Cleanup(func() {
		if bin, err := testenv.BinDir(); err != nil {
			t.Errorf("conformance: %v", err)
		} else if err := VerifyVersion(r, bin); err != nil {
			t.Errorf("conformance: %v", err)
		}
		r = finish(r, t.Failed(), t.Skipped())
		if err := write(dir, r); err != nil {
			t.Errorf("conformance: recording %s/%s: %v", r.Version, r.Scenario, err)
		}
	})
}

// finish marks r with the test's outcome and normalises its texts.
func finish(r Row, failed, skipped bool) Row {
	r.Skipped = skipped
	r.Passed = !failed && !skipped
	r.Scenario = Normalize(r.Scenario)
	r.Controller = Normalize(r.Controller)
	r.Syncmedic = Normalize(r.Syncmedic)
	return r
}

// normalizers replace what changes from run to run in a row's text, in order. Random names are testenv's
// uniqueName (internal/testenv/kube.go): a DNS label, a dash, six hex digits, e.g. "argocd-v3-6-1-b24e8e" or
// "deleting-14cd0e"; only the six digits are replaced, so the row still says which test's object it was. A name cut
// short by a message's truncation ("…-59c2…") loses its digits too.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	// RFC 3339 timestamps, e.g. 2026-11-23T21:57:42Z or 2026-11-23T21:57:42.123+01:00.
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`), "TIMESTAMP"},
	// UIDs.
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "UID"},
	// testenv's random name suffixes, whole or cut by "…".
	{regexp.MustCompile(`([a-z0-9])-[0-9a-f]{6}\b`), "$1-xxxxxx"},
	{regexp.MustCompile(`([a-z0-9])-[0-9a-f]{1,5}…`), "$1-xxxxxx…"},
	// A Go object dump (kubectl's "Invalid value: core.PodTemplateSpec{…") cut by a truncated message: where the cut
	// falls depends on the length of the random names and paths before it.
	{regexp.MustCompile(`\b([a-z0-9]+\.[A-Z][A-Za-z0-9]*)\{[^…]*…`), "$1{…"},
	// Temporary files in tools' messages, e.g. kubectl's `error when patching "/dev/shm/1368815783"`.
	{regexp.MustCompile(`/(?:dev/shm|tmp)/[^\s"':;,)]+`), "/tmp/FILE"},
	// Measured durations: "deleting for 8s", "open for 0s", "waited 28s", "took 1.2s", "5s later", "3m ago",
	// "Ready 8s after its dependency".
	{regexp.MustCompile(`\b(for|waited|took) (?:\d+(?:\.\d+)?(?:h|ms|µs|us|ns|m|s))+\b`), "$1 Xs"},
	{regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:h|ms|µs|us|ns|m|s))+ (later|ago|after its)\b`), "Xs $1"},
	// How often serve evaluated an object during a near miss: the test asserts at least once; the count follows
	// the watch's timing. "evaluated 44 times", "its dependent 14 times", "scanned 18 times".
	{regexp.MustCompile(`\b(evaluated|dependent|scanned) \d+ times\b`), "$1 N times"},
	// Git revisions of the test's repositories (their commits carry the time they were made), and the names
	// gitops-engine gives generateName hooks: <prefix><rev7>-<phase>-<the operation's start, Unix seconds>.
	{regexp.MustCompile(`\b[0-9a-f]{40}\b`), "REVISION"},
	{regexp.MustCompile(`-[0-9a-f]{7}-(presync|sync|postsync|syncfail|predelete|postdelete)-\d{9,}\b`), "-REV-$1-STARTED"},
	// The time of day Argo CD writes in "Retrying attempt #1 at 6:31AM.".
	{regexp.MustCompile(`\b\d{1,2}:\d\d(?:AM|PM)\b`), "TIME"},
}

// Normalize returns s with what changes from run to run replaced by a fixed text: timestamps, UIDs, testenv's random
// name suffixes (-xxxxxx), temporary file names, measured durations ("for Xs", "waited Xs", "took Xs", "Xs later",
// "Xs ago", "Xs after its"), evaluation counts ("evaluated N times"), Git revisions, generateName hook names and
// Argo CD's time of day.
// Durations a test configures ("within 20s", "threshold 3s", "every 30s") are kept.
func Normalize(s string) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

func write(dir string, r Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	name := unsafeFile.ReplaceAllString(strings.Join([]string{r.Tool, r.Version, r.Scenario}, "_"), "-") + ".json"
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}

// Load reads every row in dir.
func Load(dir string) ([]Row, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r Row
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Check returns an error naming every row that did not pass (skipped or failed), or saying that there are no rows:
// a matrix with a skipped or failed scenario, or none at all, proves nothing and must not be published.
func Check(rows []Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("no rows recorded: the real-controller tests did not run (run them without -short, with %s set)", DirEnv)
	}
	var bad []string
	for _, r := range Sorted(rows) {
		if !r.Passed || r.Skipped {
			bad = append(bad, fmt.Sprintf("\t%s %s %q: %s (%s)", r.Tool, r.Version, r.Scenario, r.Result(), r.Test))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d conformance rows did not pass:\n%s", len(bad), len(rows), strings.Join(bad, "\n"))
	}
	return nil
}
