package testenv

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// syncmedicBuild is the one build of ./cmd/syncmedic of a test binary (SyncmedicBinary).
var syncmedicBuild struct {
	once sync.Once
	path string
	err  error
}

// SyncmedicBinary builds ./cmd/syncmedic once per test binary, into a directory TempDir removes when the binary's
// TestMain (Main) ends, and returns its path; a failed build fails every test that asks.
func SyncmedicBinary(t testing.TB) string {
	t.Helper()
	b := &syncmedicBuild
	b.once.Do(func() {
		dir, err := TempDir("syncmedic-bin-")
		if err != nil {
			b.err = err
			return
		}
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "syncmedic")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/syncmedic")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/syncmedic: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("testenv: %v", b.err)
	}
	return b.path
}

// LockedBuffer collects a running process's (or goroutine's) output; safe for concurrent writes and reads.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Len returns how many bytes were written so far.
func (l *LockedBuffer) Len() int { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Len() }
