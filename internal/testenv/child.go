package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Child is a process started by StartChild: it dies with the test binary (Pdeathsig, the reaper, teardown) and
// writes its output to LogPath.
type Child struct {
	// Name names the process in messages; LogPath is the file holding its stdout and stderr.
	Name, LogPath string
	// Pid is the process's id, which is also its process group's (StartChild starts it in a group of its own).
	Pid    int
	exited <-chan struct{}
	stop   func()
}

// StartChild starts cmd in its own process group, with its output appended to a log file in a temporary directory
// of the harness, registered so that it is stopped at teardown (SIGTERM, then SIGKILL after grace) and killed by
// the reaper if the test binary dies. Packages of the harness that run their own tools (fluxreal) use it.
func StartChild(name string, cmd *exec.Cmd, grace time.Duration) (*Child, error) {
	dir, _, err := tempDir(name + "-")
	if err != nil {
		return nil, err
	}
	c := &Child{Name: name, LogPath: filepath.Join(dir, name+".log")}
	logFile, err := os.Create(c.LogPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stop, exited, err := startProcess(cmd, grace)
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	_ = reapLater("pg", strconv.Itoa(cmd.Process.Pid))
	c.exited, c.Pid = exited, cmd.Process.Pid
	c.stop = register(func() { stop(); _ = logFile.Close() })
	return c, nil
}

// Stop stops the process now (SIGTERM, then SIGKILL after the grace period). Safe to call more than once.
func (c *Child) Stop() { c.stop() }

// Exited is closed when the process has ended.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Tail returns the last n lines of the process's log, for failure messages.
func (c *Child) Tail(n int) string { return tail(c.LogPath, n) }

// TempDir creates a temporary directory that the harness removes at teardown (and the reaper if the binary dies).
func TempDir(pattern string) (string, error) {
	dir, _, err := tempDir(pattern)
	return dir, err
}
