package benchutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// ResultsDir is where the tools write their results unless told otherwise: bench/results of the module, as seen
// from its root (where `go run ./bench/...` runs).
const ResultsDir = "bench/results"

// Result is one run of a benchmark tool as bench/results holds it, and as bench/README quotes it: what ran, where,
// when, on which commit, and its figures, each as the tool printed it.
type Result struct {
	// Tool is the tool's name ("receiverload"), Command the command line that ran it.
	Tool    string `json:"tool"`
	Command string `json:"command"`
	// Date is when the run ended (RFC 3339, UTC); Commit the module's git commit, "+dirty" when the tree differed.
	Date   string `json:"date"`
	Commit string `json:"commit"`
	// Machine is where it ran; LoadAverage the 1, 5 and 15-minute load averages at the start and at the end.
	Machine     MachineInfo `json:"machine"`
	LoadAverage LoadAverage `json:"load_average"`
	// Source says where the figures come from when the tool did not write the file itself: "transcribed from the
	// run of <date>, commit <sha>". Empty for a file the tool wrote.
	Source string `json:"source,omitempty"`
	// Figures are the run's results, in the order the tool printed them.
	Figures []Figure `json:"figures"`
	// Notes are what the run's reader needs besides the figures (what was compared, what was checked).
	Notes []string `json:"notes,omitempty"`
}

// Figure is one named result, as printed ("0.88", "12 ms", "1,545").
type Figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MachineInfo is the machine a run used.
type MachineInfo struct {
	NProc      int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	Go         string `json:"go"`
	GOMAXPROCS int    `json:"gomaxprocs,omitempty"`
}

// LoadAverage is /proc/loadavg's first three fields at the start and at the end of a run.
type LoadAverage struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// NewResult starts the result of a run of tool with the given arguments: it records the machine, the commit and
// the load average now.
func NewResult(tool string, args []string) *Result {
	return &Result{
		Tool:        tool,
		Command:     strings.TrimSpace("go run ./bench/" + tool + " " + strings.Join(args, " ")),
		Commit:      Commit(),
		Machine:     ThisMachine(),
		LoadAverage: LoadAverage{Start: loadAverage()},
	}
}

// Add appends a figure, formatted with fmt.Sprintf(format, args...).
func (r *Result) Add(name, format string, args ...any) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: strings.TrimSpace(fmt.Sprintf(format, args...))})
}

// Note appends a note.
func (r *Result) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Write ends the run (date, load average) and writes it to dir as <tool>-<date>-<commit>.json; it returns the path.
func (r *Result) Write(dir string) (string, error) {
	now := time.Now().UTC()
	r.Date = now.Format(time.RFC3339)
	r.LoadAverage.End = loadAverage()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	commit := strings.TrimSuffix(r.Commit, "+dirty")
	if len(commit) > 7 {
		commit = commit[:7]
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", r.Tool, now.Format("20060102T150405Z"), commit))
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	return path, nil
}

// Commit returns the git commit of the working directory, with "+dirty" when the tree has changes, or "unknown".
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "+dirty"
	}
	return commit
}

// ThisMachine describes this machine: CPU count (nproc), CPU model, Go version and platform, GOMAXPROCS.
func ThisMachine() MachineInfo {
	return MachineInfo{NProc: runtime.NumCPU(), CPUModel: cpuModel(),
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0)}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}
