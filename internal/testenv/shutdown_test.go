package testenv

import (
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// leftovers is what a child test binary started, for its parent to check after the child is gone.
type leftovers struct {
	Pids  []int
	Addrs []string
	Dirs  []string
}

const (
	childStateEnv = "SYNCMEDIC_TESTENV_CHILD_STATE"
	childModeEnv  = "SYNCMEDIC_TESTENV_CHILD_MODE"
)

func TestCleanShutdown(t *testing.T) {
	skipShort(t)
	for _, mode := range []string{"fail", "kill"} {
		t.Run("nothing is left after a test binary that ends with "+mode, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state.json")
			cmd := exec.Command(os.Args[0], "-test.run=^TestShutdownChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childStateEnv+"="+state, childModeEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the child test must fail; output:\n%s", out)
			data, err := os.ReadFile(state)
			require.NoError(t, err, "child output:\n%s", out)
			var left leftovers
			require.NoError(t, json.Unmarshal(data, &left))
			require.NotEmpty(t, left.Pids)
			require.Eventually(t, func() bool { return nothingLeft(left) == nil }, defaultWait, pollEvery,
				"left behind: %v", nothingLeft(left))
		})
	}
}

func nothingLeft(left leftovers) error {
	for _, pid := range left.Pids {
		if running(pid) {
			return errors.New("process " + strings.TrimSpace(procName(pid)) + " still running")
		}
	}
	for _, addr := range left.Addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			return errors.New("something still listens on " + addr)
		}
	}
	for _, dir := range left.Dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return errors.New("directory " + dir + " still exists")
		}
	}
	return nil
}

// running reports whether pid is a live process (a zombie waiting for its new parent to reap it is dead).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func procName(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return string(b)
}

// TestShutdownChild is the child of TestCleanShutdown: it starts everything, records it, then fails (t.Fatal) or
// kills itself (SIGKILL: no cleanup runs at all). Run on its own it is skipped.
func TestShutdownChild(t *testing.T) {
	path := os.Getenv(childStateEnv)
	if path == "" {
		t.Skip("helper process for TestCleanShutdown")
	}
	env := Kube(t)
	redisAddr := Redis(t)
	argo := ArgoCD(t, env, ArgoCDOptions{DisableAuth: true})
	CMPServer(t, catPlugin)
	apiserver, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	left := leftovers{
		Pids:  childProcesses("kube-apiserver", "etcd", "redis-server"),
		Addrs: []string{apiserver.Host, redisAddr, argo.Addr, argo.Redis},
		Dirs: []string{reaper.root, env.te.ControlPlane.Etcd.DataDir, env.te.ControlPlane.APIServer.CertDir,
			filepath.Dir(env.Kubeconfig)},
	}
	data, err := json.Marshal(left)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	if os.Getenv(childModeEnv) == "kill" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	t.Fatal("failing on purpose: the parent checks that everything is cleaned up anyway")
}
