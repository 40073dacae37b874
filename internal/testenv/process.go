package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startProcess starts cmd so that it dies with this test binary (SIGKILL on parent death) and returns a stop
// function that sends SIGTERM, waits up to grace, then SIGKILLs; exited reports when the process ended.
func startProcess(cmd *exec.Cmd, grace time.Duration) (stop func(), exited <-chan struct{}, err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop = func() {
		// Signal the whole process group: the process and anything it started.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	return stop, done, nil
}

// waitTCP waits until addr accepts connections, the process exits, or the timeout passes.
func waitTCP(addr string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("process exited before listening on %s", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listening on %s after %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tempDir creates a temporary directory under the binary's root (removed by the reaper if the binary dies), removed
// by teardown and by the returned func.
func tempDir(pattern string) (dir string, remove func(), err error) {
	root, err := harnessRoot()
	if err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp(root, pattern)
	if err != nil {
		return "", nil, err
	}
	remove = register(func() { _ = os.RemoveAll(dir) })
	return dir, remove, nil
}
