package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/syncmedic/syncmedic/bench/internal/benchcheck"
	"github.com/syncmedic/syncmedic/bench/internal/benchutil"
)

func main() {
	results := flag.String("results", benchutil.ResultsDir, "directory the check's result file (JSON) is written to")
	readme := flag.String("readme", "bench/README.md", "the README whose bench-check section is rewritten from the result file (empty: none)")
	apps := flag.Int("apps", 10000, "watchscale -apps")
	flag.Parse()
	res := benchutil.NewResult("check", os.Args[1:])
	tmp, err := os.MkdirTemp("", "bench-check-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)

	measured := map[string]float64{}
	recv, err := runTool(tmp, "receiverload")
	if err != nil {
		fail(err)
	}
	if measured[benchcheck.ReceiverRatio], err = figure(recv, "receiver/baseline throughput ratio"); err != nil {
		fail(err)
	}
	watch, err := runTool(tmp, "watchscale", "-apps", strconv.Itoa(*apps))
	if err != nil {
		fail(err)
	}
	if measured[benchcheck.WatchRatio], err = figure(watch, "watch/baseline cpu ratio"); err != nil {
		fail(err)
	}
	if measured[benchcheck.HeapPerApp], err = figure(watch, "heap in use per application"); err != nil {
		fail(err)
	}
	if measured[benchcheck.ScanPeak], err = benchMetric("./snapshot", "BenchmarkRead50k", "peak-MB"); err != nil {
		fail(err)
	}

	failed := benchcheck.Judge(res, measured)
	res.Note("receiverload: go run ./bench/receiverload (defaults), commit %s; watchscale: go run ./bench/watchscale -apps %d; snapshot: go test -run '^$' -bench '^BenchmarkRead50k$' -benchtime 1x ./snapshot",
		recv.Commit, *apps)
	path, err := res.Write(*results)
	if err != nil {
		fail(err)
	}
	fmt.Println("bench-check: wrote", path)
	if *readme != "" {
		if err := benchcheck.RewriteReadme(*readme, *results); err != nil {
			fail(err)
		}
		fmt.Println("bench-check: rewrote the bench-check section of", *readme)
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "bench-check: %d figure(s) past their floor\n", failed)
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-check:", err)
	os.Exit(2)
}

// runTool runs `go run ./bench/<tool> -results dir args...`, its output going to this process's, and returns the
// result file it wrote.
func runTool(dir, tool string, args ...string) (*benchutil.Result, error) {
	sub := filepath.Join(dir, tool)
	cmd := exec.Command("go", append([]string{"run", "./bench/" + tool, "-results", sub}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Println("bench-check: running", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	files, err := filepath.Glob(filepath.Join(sub, tool+"-*.json"))
	if err != nil || len(files) != 1 {
		return nil, fmt.Errorf("%s wrote %d result files to %s, want 1", tool, len(files), sub)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	var r benchutil.Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", files[0], err)
	}
	return &r, nil
}

// figure returns the number that begins the value of r's figure name ("0.88", "5013 B").
func figure(r *benchutil.Result, name string) (float64, error) {
	for _, f := range r.Figures {
		if f.Name == name {
			v, _, _ := strings.Cut(f.Value, " ")
			n, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", ""), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: figure %q is %q, not a number", r.Tool, name, f.Value)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: no figure %q in its result", r.Tool, name)
}

// benchMetric runs one Go benchmark once and returns the value of its metric unit (as b.ReportMetric reports it).
func benchMetric(pkg, bench, unit string) (float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^"+bench+"$", "-benchtime", "1x", "-count", "1", pkg)
	fmt.Println("bench-check: running", strings.Join(cmd.Args, " "))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		os.Stdout.Write(out.Bytes())
		return 0, fmt.Errorf("%s: %w", bench, err)
	}
	os.Stdout.Write(out.Bytes())
	return benchcheck.ParseBenchMetric(out.String(), bench, unit)
}
