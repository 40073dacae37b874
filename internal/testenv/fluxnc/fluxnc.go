package fluxnc

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// Controller is a running notification-controller process.
type Controller struct {
	// EventsAddr is where Flux controllers post events (--events-addr); EventsURL is the URL to give a recorder.
	EventsAddr string
	// ReceiverAddr, MetricsAddr and HealthAddr are its other listeners, all on free loopback ports.
	ReceiverAddr, MetricsAddr, HealthAddr string
	// LogPath is the file holding the controller's output (printed on test failure).
	LogPath string
}

// EventsURL is the address a Flux event recorder posts to.
func (c *Controller) EventsURL() string { return "http://" + c.EventsAddr + "/" }

var crdsOnce struct {
	sync.Once
	err error
}

// Start installs the notification-controller CRDs (bin/crds-flux) once per test binary and starts
// bin/notification-controller against the apiserver of cfg (kubeconfig is a file for the same apiserver), on free
// loopback ports; the process is stopped when t finishes. It skips under -short and fails, naming `make tools`,
// when the binary or its CRDs are missing.
func Start(t testing.TB, cfg *rest.Config, kubeconfig string) *Controller {
	t.Helper()
	if testing.Short() {
		t.Skip("fluxnc: end-to-end test skipped under -short")
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatalf("fluxnc: %v", err)
	}
	exe := filepath.Join(bin, "notification-controller")
	crds := filepath.Join(bin, "crds-flux")
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("fluxnc: %s not found: run `make tools` first", exe)
	}
	if _, err := os.Stat(crds); err != nil {
		t.Fatalf("fluxnc: %s not found: run `make tools` first", crds)
	}
	crdsOnce.Do(func() {
		_, crdsOnce.err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true})
	})
	if crdsOnce.err != nil {
		t.Fatalf("fluxnc: installing the notification-controller CRDs: %v", crdsOnce.err)
	}
	c := &Controller{EventsAddr: freeAddr(t), ReceiverAddr: freeAddr(t), MetricsAddr: freeAddr(t), HealthAddr: freeAddr(t),
		LogPath: filepath.Join(t.TempDir(), "notification-controller.log")}
	logFile, err := os.Create(c.LogPath)
	if err != nil {
		t.Fatalf("fluxnc: %v", err)
	}
	cmd := exec.Command(exe,
		"--events-addr="+c.EventsAddr, "--receiverAddr="+c.ReceiverAddr,
		"--metrics-addr="+c.MetricsAddr, "--health-addr="+c.HealthAddr,
		"--log-level=debug", "--log-encoding=console",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE=default")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("fluxnc: starting %s: %v", exe, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			if out, err := os.ReadFile(c.LogPath); err == nil {
				t.Logf("notification-controller log:\n%s", tail(out, 8000))
			}
		}
	})
	if err := c.waitReady(exited, 60*time.Second); err != nil {
		out, _ := os.ReadFile(c.LogPath)
		t.Fatalf("fluxnc: %v\n%s", err, tail(out, 8000))
	}
	return c
}

// waitReady waits for the health endpoint's readiness check and the events listener.
func (c *Controller) waitReady(exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			return fmt.Errorf("notification-controller exited before it was ready")
		default:
		}
		res, err := client.Get("http://" + c.HealthAddr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				if conn, err := net.DialTimeout("tcp", c.EventsAddr, time.Second); err == nil {
					conn.Close()
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("notification-controller not ready after %s (last error: %v)", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fluxnc: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.ToValidUTF8(b, nil))
}
