package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
)

// Standalone runs body as the whole of a program that is not a test binary — a bench tool under bench/ — with what
// Main gives a test binary: the tools' logs quieted, Argo CD's fatal errors and SIGINT/SIGTERM stopping the control
// plane, and every process, server and temporary directory the harness started stopped when body returns. body gets
// a testing.TB whose Fatal ends body (or the goroutine that called it) and whose Cleanup functions run when body
// ends, newest first. Call it from main after flag.Parse; it returns the exit code: 0, or 1 when body failed.
func Standalone(name string, body func(t testing.TB)) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	// testing.Short, which the harness consults, needs the testing flags: registered after the program parsed its
	// own, they keep their defaults and stay out of its -help.
	testing.Init()
	configureLogging()
	harness.mu.Lock()
	harness.inMain = true
	harness.mu.Unlock()
	exitOnFatal()
	stopSignals := stopOnSignal()

	t := &standaloneTB{name: name}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer t.runCleanups()
		body(t)
	}()
	<-finished
	stopSignals()
	teardown()
	if t.Failed() {
		return 1
	}
	return 0
}

// exitOnFatal stops the control plane before Argo CD's logrus Fatal exits the program, as Main does.
func exitOnFatal() {
	logrus.StandardLogger().AddHook(&lastFatal)
	logrus.StandardLogger().ExitFunc = func(code int) {
		if argocdStopping.Load() || strings.Contains(lastFatal.message(), context.Canceled.Error()) {
			fmt.Fprintln(os.Stderr, "testenv: ignored an Argo CD fatal error raised while an argocd-server stops")
			return
		}
		teardown()
		os.Exit(code)
	}
}

// standaloneTB is the testing.TB of Standalone: logs go to stderr, Fatal ends the calling goroutine
// (runtime.Goexit, as in a test), Skip counts as a failure (a bench that cannot run has no figures). Methods it does
// not override (Setenv, Chdir...) are not for bench tools and panic.
type standaloneTB struct {
	testing.TB
	name string

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

var _ testing.TB = (*standaloneTB)(nil)

func (t *standaloneTB) Name() string { return t.name }
func (t *standaloneTB) Helper()      {}

func (t *standaloneTB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }
func (t *standaloneTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, strings.TrimSuffix(format, "\n")+"\n", args...)
}

func (t *standaloneTB) Fail() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
}

func (t *standaloneTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *standaloneTB) FailNow()                          { t.Fail(); runtime.Goexit() }
func (t *standaloneTB) Error(args ...any)                 { t.Log(args...); t.Fail() }
func (t *standaloneTB) Errorf(format string, args ...any) { t.Logf(format, args...); t.Fail() }
func (t *standaloneTB) Fatal(args ...any)                 { t.Log(args...); t.FailNow() }
func (t *standaloneTB) Fatalf(format string, args ...any) { t.Logf(format, args...); t.FailNow() }
func (t *standaloneTB) Skip(args ...any)                  { t.Fatal(append([]any{"skipped:"}, args...)...) }
func (t *standaloneTB) Skipf(format string, args ...any)  { t.Fatalf("skipped: "+format, args...) }
func (t *standaloneTB) SkipNow()                          { t.Fatal("skipped") }
func (t *standaloneTB) Skipped() bool                     { return false }

func (t *standaloneTB) Context() context.Context { return context.Background() }

// Cleanup registers fn to run when body ends, newest first.
func (t *standaloneTB) Cleanup(fn func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, fn)
	t.mu.Unlock()
}

func (t *standaloneTB) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		fn := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		fn()
	}
}

// TempDir returns a new directory that the harness removes at teardown.
func (t *standaloneTB) TempDir() string {
	dir, _, err := tempDir("standalone-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dir
}
