package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread that has joined the network namespace bound at nsPath, and moves the thread
// back to its own namespace afterwards. Sockets fn creates stay in the namespace after it returns. The thread must
// not die: the daemons the harness starts get SIGKILL when the thread that forked them ends (Pdeathsig), and Go runs
// goroutines on any thread. Only when the way back fails is the thread given up (it stays locked and ends with the
// goroutine), rather than let other goroutines run in the node's namespace.
func inNetns(nsPath string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", nsPath, err)
			return
		}
		err = fn()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// dialInNetns opens a TCP connection to addr from inside the network namespace at nsPath.
func dialInNetns(nsPath, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNetns(nsPath, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 10*time.Second)
		return err
	})
	return conn, err
}

// relay copies between a and b until either side closes, then closes both.
func relay(a, b net.Conn, aReader io.Reader) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = a.Close(); _ = b.Close() }) }
	go func() { _, _ = io.Copy(b, aReader); closeBoth() }()
	_, _ = io.Copy(a, b)
	closeBoth()
}

// forwardIntoNetns listens on listenAddr inside the network namespace at nsPath and forwards every connection to
// target, dialled from the host's namespace: the node's processes reach the apiserver on the host's loopback this
// way, and the traffic never leaves loopback. It serves until the returned stop func is called.
func forwardIntoNetns(nsPath, listenAddr, target string) (stop func(), err error) {
	_, stop, err = forwardFromNetns(nsPath, listenAddr, target)
	return stop, err
}

// forwardFromNetns is forwardIntoNetns returning the address it listens on (listenAddr with its port chosen when
// it asked for port 0).
func forwardFromNetns(nsPath, listenAddr, target string) (addr string, stop func(), err error) {
	var l net.Listener
	if err := inNetns(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", listenAddr)
		return err
	}); err != nil {
		return "", nil, fmt.Errorf("listening on %s in %s: %w", listenAddr, nsPath, err)
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				out, err := net.DialTimeout("tcp", target, 10*time.Second)
				if err != nil {
					_ = in.Close()
					return
				}
				relay(in, out, in)
			}()
		}
	}()
	return l.Addr().String(), func() { _ = l.Close() }, nil
}

// ExposeToPods makes the host's TCP address hostAddr (a test server on the host's loopback, such as the Slack test
// server) reachable from the node's Pods: it listens on the node's address inside its network namespace and relays
// each connection to hostAddr. It returns the address Pods dial (the node's IP and a free port); it stops when the
// test ends. Nothing leaves the machine: the relay's two ends are the namespace and the host's loopback.
func (n *Node) ExposeToPods(t testing.TB, hostAddr string) string {
	t.Helper()
	addr, stop, err := forwardFromNetns(n.NetnsPath, net.JoinHostPort(n.IP, "0"), hostAddr)
	if err != nil {
		t.Fatalf("testenv: exposing %s to the node's Pods: %v", hostAddr, err)
	}
	t.Cleanup(stop)
	return addr
}

// PodNetworkClient returns an HTTP client whose connections are opened inside the node's network namespace, where
// Pod IPs are reachable (ClusterIPs are not: kube-proxy's rules serve the Pods, and the namespace has no route for
// the Service range). It does not verify TLS certificates (argocd-server's own is self-signed).
func (n *Node) PodNetworkClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dialInNetns(n.NetnsPath, addr) },
		// #nosec G402 -- a test client of the node's own Pods
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
}

// serveEgressProxy serves an HTTP CONNECT proxy on the unix socket at sockPath that opens every connection from
// inside the network namespace at nsPath. The apiserver's egress selector ("cluster") sends its traffic to kubelets,
// pods and services through it, so it reaches the node's address although that exists only inside the namespace.
func serveEgressProxy(sockPath, nsPath string) (stop func(), err error) {
	l, err := net.Listen("unix", sockPath)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go proxyConnect(conn, nsPath)
		}
	}()
	return func() { _ = l.Close(); _ = os.Remove(sockPath) }, nil
}

// proxyConnect answers one CONNECT request on conn and relays the tunnel.
func proxyConnect(conn net.Conn, nsPath string) {
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	req, err := http.ReadRequest(br)
	if err != nil {
		_ = conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		_ = conn.Close()
		return
	}
	out, err := dialInNetns(nsPath, req.Host)
	if err != nil {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		_ = conn.Close()
		return
	}
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = conn.Close()
		_ = out.Close()
		return
	}
	relay(conn, out, br)
}

// egressSelectorConfig is the apiserver's --egress-selector-config-file that sends its cluster traffic (kubelet,
// pods, services) through the CONNECT proxy on the unix socket sockPath.
func egressSelectorConfig(sockPath string) string {
	return fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sockPath)
}

// runIn runs a command (argv) inside the network namespace at nsPath with nsenter and returns its combined output.
func runIn(ctx context.Context, nsPath string, argv ...string) ([]byte, error) {
	return runCmd(ctx, append([]string{"nsenter", "--net=" + nsPath}, argv...)...)
}
