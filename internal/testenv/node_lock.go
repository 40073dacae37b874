package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeLockPath is the machine-wide lock of the one real node a machine can run (the kubelet's cgroups and host paths
// are global): a test binary holds it from the start of its node to the end of its Stop. The kernel releases it when
// the binary dies, however it dies; the file itself stays (it is empty but for the holder's PID).
const nodeLockPath = "/run/lock/syncmedic-real-node.lock"

// nodeLockWait bounds the wait for another test binary's node (`make test` runs two packages at once; internal/testenv,
// kube and internal/imagebuild start one for a few minutes, internal/conformance/argo for its whole run, about 20
// minutes on 2 cores under load): long enough for the argo package, short enough to leave the waiting binary its own
// run within go test's -timeout 60m.
const nodeLockWait = 35 * time.Minute

// nodeLock is the held machine lock; release gives it back.
type nodeLock struct {
	f *os.File
	// since is when the lock was taken.
	since time.Time
}

// acquireNodeLock waits until no other process holds the machine's node lock and takes it. The error says whether
// the wait timed out (retry when the other node is gone) or the lock file cannot be opened (do not retry).
func acquireNodeLock(ctx context.Context, path string) (*nodeLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	// Go opens files close-on-exec: the daemons the node starts never inherit the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the node lock: %w", err)
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !said {
			holder, _ := os.ReadFile(path)
			fmt.Fprintf(os.Stderr, "testenv: waiting for the real node of process %s to stop (one node per machine)\n",
				strings.TrimSpace(string(holder)))
			said = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("another test binary's real node still runs (%s held); retry when it stopped: %w",
				path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &nodeLock{f: f, since: time.Now()}, nil
}

// release gives the lock back and logs how long this binary held it (the machine's node time it took, for the
// time budget of `make test`).
func (l *nodeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "testenv: real node stopped; this test binary held the machine's node for %s\n",
		time.Since(l.since).Round(time.Second))
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// nodeIdleGrace is how long a node started by RealNodeWhileUsed stays up after its last user ended, for the next
// test that wants it.
const nodeIdleGrace = time.Minute

// RealNodeWhileUsed is RealNode for a test binary whose node tests are few and run together (sequential top-level
// tests, or parallel subtests of them): when the last test that asked for the node has ended and none asks within
// nodeIdleGrace, the node, its control plane and the Argo CD stacks on it stop, so the machine's one node is free for
// the other test binaries of `make test` long before this binary ends. A later call starts a new node. A RealNode
// call in the same binary keeps the node up until the binary ends.
func RealNodeWhileUsed(t testing.TB) *Node {
	t.Helper()
	n := realNode(t)
	s := &sharedNode
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != n {
		t.Fatal("testenv: the real node stopped while starting a test on it")
	}
	s.users++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.users--
		if s.users > 0 || s.pinned || s.node != n {
			return
		}
		var timer *time.Timer // set before the function can run: it takes s.mu first
		timer = time.AfterFunc(nodeIdleGrace, func() { stopIdleNode(n, timer) })
		s.idle = timer
	})
	return n
}

// stopIdleNode stops n if it is still the shared node, unused and not pinned, and timer is still the idle timer (no
// test asked for the node since it was set).
func stopIdleNode(n *Node, timer *time.Timer) {
	s := &sharedNode
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node != n || s.users > 0 || s.pinned || s.idle != timer {
		return
	}
	s.node, s.idle = nil, nil
	if err := n.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the idle real node: %v\n", err)
	}
}
