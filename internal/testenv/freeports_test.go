package testenv

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeChild is a PortChild whose output and exit a test scripts.
type fakeChild struct {
	mu      sync.Mutex
	output  string
	exited  chan struct{}
	stopped bool
}

func newFakeChild(output string, exited bool) *fakeChild {
	c := &fakeChild{output: output, exited: make(chan struct{})}
	if exited {
		close(c.exited)
	}
	return c
}

func (c *fakeChild) Exited() <-chan struct{} { return c.exited }
func (c *fakeChild) Output() string          { c.mu.Lock(); defer c.mu.Unlock(); return c.output }
func (c *fakeChild) Stop()                   { c.mu.Lock(); defer c.mu.Unlock(); c.stopped = true }

// exitLater makes c log output and exit after d, as a child does that lost its port after its readiness check
// reached the process that took it.
func (c *fakeChild) exitLater(output string, d time.Duration) {
	go func() {
		time.Sleep(d)
		c.mu.Lock()
		c.output += output
		c.mu.Unlock()
		close(c.exited)
	}()
}

const goBindError = "FATA[0000] listen tcp 127.0.0.1:40123: bind: address already in use\n"

// TestStartOnFreePortsStartsAChildThatLostItsPortAgain: a child that could not bind a port picked for it — it exits
// with the bind error, or logs it and stays up, or its readiness check reached the process that took the port and
// it exits a moment later — is stopped and started again on new ports, three starts at most; a child that fails
// otherwise is not started again.
func TestStartOnFreePortsStartsAChildThatLostItsPortAgain(t *testing.T) {
	notReady := errors.New("process exited while starting")
	type start struct {
		child *fakeChild
		ready error
		late  string // output logged, then exit, 50ms after the start
	}
	tests := []struct {
		name    string
		starts  []start
		reserve bool
		wantOK  bool
		want    int // starts made
		errText string
	}{
		{name: "exited with a bind error before it was ready: started again, then up",
			starts: []start{{child: newFakeChild(goBindError, true), ready: notReady}, {child: newFakeChild("serving\n", false)}},
			wantOK: true, want: 2},
		{name: "logged a bind error but stays up (its readiness reached another process): started again",
			starts: []start{{child: newFakeChild("INFO starting\nERROR artifact server error: "+goBindError, false)}, {child: newFakeChild("serving\n", false)}},
			wantOK: true, want: 2},
		{name: "looked ready, then exited with the bind error while settling: started again",
			starts: []start{{child: newFakeChild("starting\n", false), late: goBindError}, {child: newFakeChild("serving\n", false)}},
			wantOK: true, want: 2},
		{name: "redis-server's bind error counts too",
			starts: []start{{child: newFakeChild("# Warning: Could not create server TCP listening socket 127.0.0.1:40123: bind: Address already in use\n", true), ready: notReady},
				{child: newFakeChild("", false)}},
			wantOK: true, want: 2},
		{name: "the first start uses the reserved ports, the next ones new ports",
			starts:  []start{{child: newFakeChild(goBindError, true), ready: notReady}, {child: newFakeChild("", false)}},
			reserve: true, wantOK: true, want: 2},
		{name: "exited without a bind error: not started again",
			starts: []start{{child: newFakeChild("FATA unknown flag --foo\n", true), ready: notReady}, {child: newFakeChild("", false)}},
			want:   1, errText: "unknown flag --foo"},
		{name: "exited right after it looked ready, without a bind error: not started again",
			starts: []start{{child: newFakeChild("starting\n", false), late: "panic: nil map\n"}, {child: newFakeChild("", false)}},
			want:   1, errText: "exited right after it looked ready"},
		{name: "a port lost three times: three starts, then the error",
			starts: []start{{child: newFakeChild(goBindError, true), ready: notReady}, {child: newFakeChild(goBindError, true), ready: notReady},
				{child: newFakeChild(goBindError, true), ready: notReady}, {child: newFakeChild("", false)}},
			want: 3, errText: "start 3 of 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]int
			var reserved []int
			if tt.reserve {
				reserved = []int{1, 2}
			}
			c, ports, err := StartOnFreePorts(FreePortsOptions{Name: "child", Ports: 2, Reserved: reserved, Settle: 200 * time.Millisecond,
				Start: func(ports []int) (PortChild, error) {
					s := tt.starts[len(got)]
					got = append(got, ports)
					if s.late != "" {
						s.child.exitLater(s.late, 50*time.Millisecond)
					}
					return s.child, nil
				},
				Ready: func(ports []int, c PortChild) error { return tt.starts[len(got)-1].ready },
			})
			require.Len(t, got, tt.want, "starts")
			for i := 0; i < len(got)-1; i++ {
				require.True(t, tt.starts[i].child.stopped, "start %d was stopped", i+1)
				require.NotEqual(t, got[i], got[i+1], "each start gets new ports")
			}
			if tt.reserve {
				require.Equal(t, []int{1, 2}, got[0])
			}
			if !tt.wantOK {
				require.Error(t, err)
				require.Contains(t, err.Error(), tt.errText)
				require.Nil(t, c)
				return
			}
			require.NoError(t, err)
			require.Same(t, tt.starts[tt.want-1].child, c)
			require.Equal(t, got[tt.want-1], ports)
			require.False(t, tt.starts[tt.want-1].child.stopped)
		})
	}
}

func TestBindFailed(t *testing.T) {
	for _, tt := range []struct {
		output string
		want   bool
	}{
		{goBindError, true},
		{"# Could not create server TCP listening socket 127.0.0.1:6379: bind: Address already in use", true},
		{`ts=2026-11-26T14:00:00Z level=error msg="Listen error" err="listen tcp 127.0.0.1:9093: bind: address already in use"`, true},
		{"level=info msg=\"Listening on\" address=127.0.0.1:9093", false},
		{"dial tcp 127.0.0.1:6379: connect: connection refused", false},
	} {
		require.Equal(t, tt.want, BindFailed(tt.output), tt.output)
	}
}

// TestRedisTakesAnotherPortWhenItsPortIsTaken: with its port taken by another process, redis-server logs the bind
// error and exits, and is started on another port where it answers. Taken by a listener that answers no PING, or by
// another test's redis-server, which answers the PING itself: that answer alone must not pass for this one's.
func TestRedisTakesAnotherPortWhenItsPortIsTaken(t *testing.T) {
	skipShort(t)
	requireMain(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	other, stopOther, err := startRedis()
	require.NoError(t, err)
	defer stopOther()
	_, otherPort, err := net.SplitHostPort(other)
	require.NoError(t, err)
	for name, taken := range map[string]int{"a silent listener": l.Addr().(*net.TCPAddr).Port, "another redis-server": mustAtoi(t, otherPort)} {
		t.Run(name, func(t *testing.T) {
			addr, stop, err := startRedisOn([]int{taken})
			require.NoError(t, err)
			defer stop()
			require.NotEqual(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(taken)), addr, "not the port another process holds")
			require.NoError(t, pingRedis(addr))
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// TestAnArgoCDComponentsRestartReadsOnlyItsOwnLog: the Argo CD components' starts append to one log file, so the
// bind error of a start that lost its port must not make the next start look lost too.
func TestAnArgoCDComponentsRestartReadsOnlyItsOwnLog(t *testing.T) {
	requireMain(t)
	dir := t.TempDir()
	logPath := dir + "/argocd-repo-server.log"
	first, err := startLogged("/bin/sh", []string{"-c", "echo 'listen tcp 127.0.0.1:1: bind: address already in use'"}, nil, dir, logPath)
	require.NoError(t, err)
	<-first.Exited()
	require.True(t, BindFailed(first.Output()))
	second, err := startLogged("/bin/sh", []string{"-c", "echo serving; sleep 30"}, nil, dir, logPath)
	require.NoError(t, err)
	defer second.Stop()
	require.Eventually(t, func() bool { return second.Output() == "serving\n" }, 5*time.Second, 20*time.Millisecond, "only this start's output: %q", second.Output())
	require.False(t, BindFailed(second.Output()))
	require.Contains(t, tail(logPath, 5), "address already in use", "the file keeps every start's output")
}

// TestFreePortsPicksBelowTheEphemeralRange: the ports FreePorts picks differ, each is free once it returns, and all lie
// in [portsFrom, portsTo), below this machine's ephemeral range, where the kernel gives out no port to a connection
// or a listener on port 0 between the pick and the child's bind.
func TestFreePortsPicksBelowTheEphemeralRange(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		low, err := strconv.Atoi(strings.Fields(string(b))[0])
		require.NoError(t, err)
		require.LessOrEqual(t, portsTo, low, "the picked range ends where this machine's ephemeral range starts, or below")
	}
	ports, err := FreePorts(20)
	require.NoError(t, err)
	require.Len(t, ports, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "the ports differ: %v", ports)
		seen[p] = true
		require.GreaterOrEqual(t, p, portsFrom, ports)
		require.Less(t, p, portsTo, "below the ephemeral range: %v", ports)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d is free once FreePorts returns", p)
		require.NoError(t, l.Close())
	}
}
