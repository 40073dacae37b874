package reliability

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// buildSyncmedic builds the syncmedic binary into a temporary directory.
func buildSyncmedic(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "syncmedic")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/syncmedic")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/syncmedic: %s", out)
	return bin
}

// daemonProcess is one `syncmedic serve` subprocess.
type daemonProcess struct {
	cmd  *exec.Cmd
	logs *testenv.LockedBuffer
	done chan struct{}
	addr string
}

// startDaemon runs `syncmedic serve` with args and waits until /readyz answers 200. The process dies with the
// test binary (Pdeathsig) and is killed when the test ends.
func startDaemon(t *testing.T, bin string, args ...string) *daemonProcess {
	t.Helper()
	d := &daemonProcess{logs: &testenv.LockedBuffer{}, done: make(chan struct{}), addr: freeAddr(t)}
	token := filepath.Join(t.TempDir(), "flux-hmac-token") // serve runs no Flux receiver without one
	require.NoError(t, os.WriteFile(token, []byte("reliability-hmac-token"), 0o600))
	d.cmd = exec.Command(bin, append([]string{"serve", "--listen", d.addr, "--log-format", "text", "--flux-hmac-token-file", token}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, d.cmd.Start())
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			t.Logf("syncmedic serve (pid %d) output:\n%s", d.cmd.Process.Pid, d.logs.String())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-d.done:
			return true
		default:
		}
		res, err := http.Get("http://" + d.addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "syncmedic serve did not become ready")
	select {
	case <-d.done:
		t.Fatalf("syncmedic serve exited: %s\n%s", d.cmd.ProcessState, d.logs.String())
	default:
	}
	return d
}

// kill sends SIGKILL (no shutdown path runs) and waits for the process to end.
func (d *daemonProcess) kill() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}
