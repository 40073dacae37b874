package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/ui"
)

// serveProc is the real `syncmedic serve` process.
type serveProc struct {
	addr, apiToken, logPath string
	done                    chan struct{}
}

// buildSyncmedic builds ./cmd/syncmedic into a temporary directory (run from inside the module).
func buildSyncmedic(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "syncmedic")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/syncmedic/syncmedic/cmd/syncmedic")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/syncmedic: %v\n%s", err, out)
	}
	return bin
}

// startServe runs `syncmedic serve` against the stack's argocd-server (admin token, plaintext), watching every
// application, with policy as its policy file, announcing on slackURL, with the incident API on; it waits until
// /readyz answers 200. Flags other than these are serve's defaults.
func startServe(t testing.TB, bin string, stack *testenv.RealArgoCD, policy, slackURL string, extra []string) *serveProc {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatalf("%v", err)
		}
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	s := &serveProc{addr: l.Addr().String(), apiToken: "bench-api-token-0123456789abcdef0123", logPath: filepath.Join(dir, "serve.log"),
		done: make(chan struct{})}
	_ = l.Close()
	args := []string{"serve", "--listen", s.addr, "--log-format", "text", "--log-level", "info",
		"--kubeconfig", stack.Env.Kubeconfig, "--kube-checks=false", "--flux-watch=false",
		"--argocd-server", stack.Addr, "--argocd-plaintext", "--argocd-token-file", write("argocd-token", stack.AdminToken(t)),
		"--policy-file", write("policy.yaml", policy),
		"--api-token-file", write("api-token", s.apiToken),
		"--slack-token-file", write("slack-token", "xoxb-bench"), "--slack-channel", "#incidents",
		"--slack-api-url", slackURL}
	args = append(args, extra...)
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting syncmedic serve: %v", err)
	}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(s.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-s.done:
			t.Fatalf("syncmedic serve exited:\n%s", s.tail(30))
		default:
		}
		if res, err := http.Get("http://" + s.addr + "/readyz"); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("syncmedic serve not ready after 2m:\n%s", s.tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// liveFailures counts serve's log lines saying a live-state read failed ("argocd live state unavailable"), and
// those of them that hit the read's timeout.
func (s *serveProc) liveFailures() (failed, timedOut int) {
	data, _ := os.ReadFile(s.logPath)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "argocd live state unavailable") {
			failed++
			if strings.Contains(line, "DeadlineExceeded") || strings.Contains(line, "deadline exceeded") {
				timedOut++
			}
		}
	}
	return failed, timedOut
}

func (s *serveProc) tail(n int) string {
	data, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// metric sums every sample of the Prometheus metric name on serve's /metrics (0 when absent).
func (s *serveProc) metric(name string) (float64, error) {
	res, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var sum float64
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
	}
	return sum, sc.Err()
}

// incidents reads every incident (open and recently resolved) from serve's incident API.
func (s *serveProc) incidents() ([]ui.Incident, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+"/api/v1/incidents?"+url.Values{"state": {"all"}}.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.apiToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/incidents: %s", res.Status)
	}
	var list ui.IncidentList
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Items, nil
}
