package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Redis starts a real redis-server (the Debian package) on a free loopback port for this test and returns its
// address ("127.0.0.1:port"). It is stopped when the test ends. It skips under -short.
func Redis(t testing.TB) string {
	t.Helper()
	skipShort(t)
	requireMain(t)
	addr, stop, err := startRedis()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(stop)
	return addr
}

func redisPath() (string, error) {
	if bin, err := BinDir(); err == nil {
		if p := filepath.Join(bin, "redis-server"); isExecutable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found: run `make tools` (installs the Debian redis-server package)")
	}
	return p, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startRedis starts redis-server with no persistence in its own temporary directory, retrying when another process
// takes the chosen port first.
func startRedis() (addr string, stop func(), err error) {
	path, err := redisPath()
	if err != nil {
		return "", nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		addr, stop, err = startRedisOnce(path)
		if err == nil {
			return addr, stop, nil
		}
	}
	return "", nil, fmt.Errorf("starting redis-server: %w", err)
}

func startRedisOnce(path string) (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	dir, removeDir, err := tempDir("redis-")
	if err != nil {
		return "", nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "yes", "--loglevel", "warning", "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = &out, &out
	stopProc, exited, err := startProcess(cmd, 5*time.Second)
	if err != nil {
		removeDir()
		return "", nil, err
	}
	stop := register(func() {
		stopProc()
		removeDir()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitRedis(addr, exited); err != nil {
		stop()
		return "", nil, fmt.Errorf("%w; output: %s", err, out.String())
	}
	return addr, stop, nil
}

// waitRedis waits until redis answers PING.
func waitRedis(addr string, exited <-chan struct{}) error {
	if err := waitTCP(addr, exited, 10*time.Second); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pingRedis(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pingRedis(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("redis at %s answered %q to PING", addr, line)
	}
	return nil
}
