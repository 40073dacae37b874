package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	// Test is the name of the test that produced the row; Passed says whether it passed.
	Test   string `json:"test"`
	Passed bool   `json:"passed"`
}

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Record writes r when the test ends, marked with whether the test passed. Nothing is written when DirEnv is unset.
func Record(t testing.TB, r Row) {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return
	}
	r.Test = t.Name()
	t.Cleanup(func() {
		r.Passed = !t.Failed()
		if err := write(dir, r); err != nil {
			t.Errorf("conformance: recording %s/%s: %v", r.Version, r.Scenario, err)
		}
	})
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
