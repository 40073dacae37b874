package argo

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
	if syncmedicBuild.dir != "" {
		_ = os.RemoveAll(syncmedicBuild.dir)
	}
}

var syncmedicBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// syncmedicBinary builds ./cmd/syncmedic once per test binary.
func syncmedicBinary(t *testing.T) string {
	t.Helper()
	b := &syncmedicBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "syncmedic-conformance-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "syncmedic")
		cmd := exec.Command("go", "build", "-o", b.bin, "./cmd/syncmedic")
		cmd.Dir = filepath.Join("..", "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/syncmedic: %v\n%s", err, out)
		}
	})
	require.NoError(t, b.err)
	return b.bin
}

// slackMessage is one chat.postMessage or chat.update the Slack test server accepted.
type slackMessage = slackrec.Message

// fakeSlack is the recording Slack test server, with this package's ways of reading it.
type fakeSlack struct{ *slackrec.Server }

func newFakeSlack(t *testing.T) *fakeSlack { return &fakeSlack{slackrec.New(t)} }

// all returns every message received, in order.
func (f *fakeSlack) all() []slackMessage { return f.All() }

// roots returns the root messages (new incidents).
func (f *fakeSlack) roots() []slackMessage { return f.Roots() }

// rootWithRule returns the first root message naming rule, if any.
func (f *fakeSlack) rootWithRule(rule string) (slackMessage, bool) {
	for _, m := range f.roots() {
		if strings.Contains(m.Blocks, rule) || strings.Contains(m.Text, rule) {
			return m, true
		}
	}
	return slackMessage{}, false
}

// replies returns the texts of the replies in the thread of ts, in order.
func (f *fakeSlack) replies(ts string) []string {
	var out []string
	for _, m := range f.all() {
		if m.Method == "chat.postMessage" && m.ThreadTS == ts {
			out = append(out, m.Text)
		}
	}
	return out
}

// summary lists what Slack received, one line per message, for conformance rows and failure messages.
func (f *fakeSlack) summary() string { return f.Summary() }

// serveDaemon is one `syncmedic serve` process watching one app of a stack.
type serveDaemon struct {
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startServe runs `syncmedic serve` against the stack's argocd-server (admin token, plaintext), watching only app
// (--argocd-selector), with policy as its policy file, announcing on a new Slack test server; it waits until
// /readyz answers 200. The daemon is killed when the test ends, and its output logged if the test failed.
func startServe(t *testing.T, app *testenv.RealHookApp, policy string) *fakeSlack {
	t.Helper()
	bin := syncmedicBinary(t)
	stack := app.Stack
	srv := newFakeSlack(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	args := []string{"serve", "--listen", addr, "--log-format", "text", "--log-level", "debug",
		"--kubeconfig", stack.Env.Kubeconfig, "--kube-checks=false", "--flux-watch=false",
		"--argocd-server", stack.Addr, "--argocd-plaintext", "--argocd-token-file", write("argocd-token", stack.AdminToken(t)),
		"--argocd-selector", app.Selector(), "--argocd-live-resync", "1s",
		"--policy-file", write("policy.yaml", policy),
		"--slack-token-file", write("slack-token", "xoxb-conformance"), "--slack-channel", "#incidents",
		"--slack-api-url", srv.GetAPIURL()}
	d := &serveDaemon{logs: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
		if t.Failed() {
			t.Logf("syncmedic serve output:\n%s", d.logs.String())
			t.Logf("Slack received:\n%s", srv.summary())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "syncmedic serve did not become ready")
	select {
	case <-d.done:
		t.Fatalf("syncmedic serve exited: %s\n%s", d.cmd.ProcessState, d.logs.String())
	default:
	}
	return srv
}
