package testenv

import (
	"bufio"
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

// startRedis starts redis-server with no persistence in its own temporary directory on a free port, started again
// on another one when another process takes it first (StartOnFreePorts: the PING may even reach that process's
// redis, so it is the bind error redis-server logs before it exits that tells).
func startRedis() (addr string, stop func(), err error) { return startRedisOn(nil) }

// startRedisOn is startRedis whose first start uses the port reserved, when given.
func startRedisOn(reserved []int) (addr string, stop func(), err error) {
	path, err := redisPath()
	if err != nil {
		return "", nil, err
	}
	dir, removeDir, err := tempDir("redis-")
	if err != nil {
		return "", nil, err
	}
	c, ports, err := StartOnFreePorts(FreePortsOptions{Name: "redis-server", Ports: 1, Reserved: reserved,
		Start: func(ports []int) (PortChild, error) {
			cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--save", "", "--appendonly", "no",
				"--dir", dir, "--protected-mode", "yes", "--loglevel", "warning", "--daemonize", "no")
			return StartChild("redis-server", cmd, 5*time.Second)
		},
		Ready: func(ports []int, c PortChild) error { return waitRedis(loopback(ports[0]), c.Exited()) },
	})
	if err != nil {
		removeDir()
		return "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	return loopback(ports[0]), func() { c.Stop(); removeDir() }, nil
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
		select {
		case <-exited:
			return fmt.Errorf("process exited while answering no PING on %s", addr)
		default:
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
