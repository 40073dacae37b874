package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// PortChild is a process started on loopback ports that StartOnFreePorts picked for it.
type PortChild interface {
	// Exited is closed when the process has ended.
	Exited() <-chan struct{}
	// Output is what this start of the process has written so far (its log).
	Output() string
	// Stop stops the process; safe to call more than once.
	Stop()
}

// FreePortsOptions says how StartOnFreePorts starts one child.
type FreePortsOptions struct {
	// Name names the child in errors.
	Name string
	// Ports is how many free loopback ports each start needs.
	Ports int
	// Reserved, when set, are the ports of the first start, picked (and published) by the caller beforehand; the
	// starts after it get new ones.
	Reserved []int
	// Start starts the child on ports.
	Start func(ports []int) (PortChild, error)
	// Ready waits until the child serves on ports; it returns an error when the child exits or the wait times out.
	Ready func(ports []int, c PortChild) error
	// Settle is how long the child must stay up, without a bind error, once Ready said it serves (default
	// DefaultSettle): Ready can have reached the process that took the child's port.
	Settle time.Duration
}

// DefaultSettle is FreePortsOptions.Settle's default.
const DefaultSettle = 500 * time.Millisecond

// portAttempts is how many times StartOnFreePorts starts a child that loses a port.
const portAttempts = 3

// errLostPort marks a start whose child could not bind a port picked for it.
var errLostPort = errors.New("lost a port to another process")

// StartOnFreePorts starts a child on Ports free loopback ports and, when it lost one of them to another process
// between the pick and its bind — its output shows a bind error, whether it exited or stays up without serving it —
// starts it again on new ports, up to three starts in all. A start whose child fails otherwise (it exits without a
// bind error, or is not ready in time) is not repeated. It returns the running child and its ports.
func StartOnFreePorts(o FreePortsOptions) (PortChild, []int, error) {
	settle := o.Settle
	if settle == 0 {
		settle = DefaultSettle
	}
	var lastErr error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		ports := o.Reserved
		if attempt > 1 || len(ports) != o.Ports {
			var err error
			if ports, err = FreePorts(o.Ports); err != nil {
				return nil, nil, err
			}
		}
		c, err := o.Start(ports)
		if err != nil {
			return nil, nil, fmt.Errorf("starting %s: %w", o.Name, err)
		}
		err = o.Ready(ports, c)
		if err == nil {
			err = settled(c, settle)
		}
		if err == nil && BindFailed(c.Output()) {
			err = errLostPort
		}
		if err == nil {
			return c, ports, nil
		}
		c.Stop()
		lastErr = fmt.Errorf("%s on ports %v (start %d of %d): %w\n%s", o.Name, ports, attempt, portAttempts, err, lastLines(c.Output(), 30))
		if !errors.Is(err, errLostPort) && !BindFailed(c.Output()) {
			break
		}
	}
	return nil, nil, lastErr
}

// The loopback ports FreePorts picks: [portsFrom, portsTo), below Linux's ephemeral range (32768–60999 by default,
// /proc/sys/net/ipv4/ip_local_port_range), as cmd/syncmedic's tests pick serve's. The kernel hands out ephemeral ports
// to every outgoing connection and to every listener on port 0, so one picked there and released before the child
// binds it can go to any connection the machine opens meanwhile (kube clients, the node's containers, other tests'
// servers); below the range only another test's pick can take it, and StartOnFreePorts starts the child again then.
const (
	portsFrom = 20000
	portsTo   = 32768
)

// portPicks bounds the random picks FreePorts makes for one port before it gives up.
const portPicks = 100

// FreePorts returns n different loopback ports in [portsFrom, portsTo), each one a listener could bind a moment ago.
// It holds every listener until all n are chosen, so the ports differ. A child started on them can still lose one to
// another test's pick: StartOnFreePorts starts it again.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := listenBelowEphemeral()
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenBelowEphemeral listens on a random free loopback port in [portsFrom, portsTo).
func listenBelowEphemeral() (net.Listener, error) {
	var err error
	for range portPicks {
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(portsFrom+rand.IntN(portsTo-portsFrom)))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("testenv: no free loopback port in %d-%d after %d random picks (last: %w): find what holds that range (ss -ltn)",
		portsFrom, portsTo-1, portPicks, err)
}

// settled waits d and reports whether c is still running then.
func settled(c PortChild, d time.Duration) error {
	select {
	case <-c.Exited():
		return errors.New("exited right after it looked ready")
	case <-time.After(d):
		return nil
	}
}

// BindFailed reports whether a child's output shows it could not listen on an address: Go's "bind: address already
// in use" (argocd-*, alertmanager, the Flux controllers) and redis-server's "bind: Address already in use".
func BindFailed(output string) bool {
	return strings.Contains(strings.ToLower(output), "address already in use")
}

// Output implements PortChild: the whole log of this start.
func (c *Child) Output() string {
	b, _ := os.ReadFile(c.LogPath)
	return string(b)
}

var _ PortChild = (*Child)(nil)

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
