package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The reaper is a tiny shell process, started on first use, that outlives a test binary which dies without
// running its cleanups (a panic, `go test -timeout`, SIGKILL): once this process is gone it kills the process
// groups, removes the directories and runs the clean-up scripts listed in <root>/reap, in order, then removes root
// itself. Processes the harness starts
// directly also die with the binary (Pdeathsig); envtest's kube-apiserver and etcd do not, hence the reaper.
var reaper struct {
	once sync.Once
	mu   sync.Mutex
	root string
	stop func()
	err  error
}

const reaperScript = `parent=$1; root=$2
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
if [ -f "$root/reap" ]; then
  while read -r kind value; do
    case "$kind" in
      pg) kill -KILL "-$value" 2>/dev/null ;;
      dir) rm -rf -- "$value" ;;
      sh) sh -- "$value" >/dev/null 2>&1 ;;
    esac
  done < "$root/reap"
fi
rm -rf -- "$root"`

// harnessRoot returns the binary's temporary root directory, starting the reaper on first use.
func harnessRoot() (string, error) {
	reaper.once.Do(func() {
		root, err := os.MkdirTemp("", "syncmedic-testenv-")
		if err != nil {
			reaper.err = err
			return
		}
		cmd := exec.Command("sh", "-c", reaperScript, "reaper", strconv.Itoa(os.Getpid()), root)
		// Its own process group, so a Ctrl-C to the test does not stop it before it has cleaned up.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(root)
			reaper.err = fmt.Errorf("starting the reaper: %w", err)
			return
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		reaper.root = root
		// Registered first, so teardown runs it last: everything else is stopped by then.
		register(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			_ = os.RemoveAll(root)
		})
	})
	return reaper.root, reaper.err
}

// reapLater records a process group, directory or clean-up script for the reaper ("pg", pgid) / ("dir", path) /
// ("sh", script path).
func reapLater(kind, value string) error {
	root, err := harnessRoot()
	if err != nil {
		return err
	}
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(root, "reap"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s\n", kind, value)
	return err
}

// childProcesses returns the pids of this process's direct children whose command name is one of names.
func childProcesses(names ...string) []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces, so split after the last ')'.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		for _, n := range names {
			if s[open+1:end] == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
