package testenv

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// harness is the process-wide registry of everything this test binary started, so that Main (or a signal, an
// impending -timeout, or a log.Fatal inside Argo CD) can stop it all.
var harness = struct {
	mu       sync.Mutex
	inMain   bool
	stopping bool
	nextID   int
	stops    map[int]func()
	order    []int
}{stops: map[int]func(){}}

// argocdStopping is set once an in-process argocd-server is being stopped (see Main's logrus ExitFunc).
var argocdStopping atomic.Bool

// lastFatal keeps the message of Argo CD's last logrus Fatal, so the ExitFunc can tell a shutdown artifact
// ("context canceled") from a real failure.
var lastFatal fatalHook

type fatalHook struct{ msg atomic.Value }

func (h *fatalHook) Levels() []logrus.Level { return []logrus.Level{logrus.FatalLevel} }

// Fire runs before logrus exits. Argo CD's util/errors.Fatal registers an exit handler that calls os.Exit before
// logrus' ExitFunc, so a Fatal that is only a stopping server's "context canceled" is stopped here: the goroutine
// that raised it (a loader of a server being shut down) is parked for the rest of the test binary.
func (h *fatalHook) Fire(e *logrus.Entry) error {
	h.msg.Store(e.Message)
	if argocdStopping.Load() || strings.Contains(e.Message, context.Canceled.Error()) {
		fmt.Fprintf(os.Stderr, "testenv: ignored an Argo CD fatal error raised while an argocd-server stops: %s\n", e.Message)
		select {}
	}
	return nil
}

func (h *fatalHook) message() string { s, _ := h.msg.Load().(string); return s }

// MainParallel is Main for a package whose parallel scenarios mostly wait (for controllers, thresholds and TTLs)
// rather than compute: unless `go test -parallel` was given, parallel tests run up to parallel at once instead of
// GOMAXPROCS (2 in CI).
//
//	func TestMain(m *testing.M) { testenv.MainParallel(m, 6) }
func MainParallel(m *testing.M, parallel int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			panic(err)
		}
	}
	Main(m)
}

// Main runs the tests of a package and then stops every process, server and temporary directory this test binary
// started, even when a test failed. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	if !flag.Parsed() {
		flag.Parse()
	}
	configureLogging()
	harness.mu.Lock()
	harness.inMain = true
	harness.mu.Unlock()

	// Argo CD calls logrus' Fatal on unrecoverable errors: stop our processes before the binary exits.
	logrus.StandardLogger().AddHook(&lastFatal)
	logrus.StandardLogger().ExitFunc = func(code int) {
		if argocdStopping.Load() || strings.Contains(lastFatal.message(), context.Canceled.Error()) {
			// A server being stopped fails its in-flight loads with "context canceled", which some Argo CD
			// goroutines treat as fatal (server.rbacPolicyLoader): that is shutdown, not a failure. Returning lets
			// the goroutine end; the message was already printed.
			fmt.Fprintln(os.Stderr, "testenv: ignored an Argo CD fatal error raised while an argocd-server stops")
			return
		}
		teardown()
		os.Exit(code)
	}
	stopSignals := stopOnSignal()
	stopWatchdog := timeoutWatchdog()

	// When TestMain returns, the testing package exits with the code m.Run returned.
	m.Run()

	stopWatchdog()
	stopSignals()
	teardown()
}

// timeoutWatchdog stops the control plane shortly before `go test -timeout` would kill the binary without running
// any cleanup, so a hung test leaves no processes behind.
func timeoutWatchdog() (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	d, ok := f.Value.(flag.Getter).Get().(time.Duration)
	if !ok || d <= 0 {
		return func() {}
	}
	margin := 10 * time.Second
	if d < 4*margin {
		margin = d / 4
	}
	timer := time.AfterFunc(d-margin, func() {
		fmt.Fprintln(os.Stderr, "testenv: the test binary is about to reach -timeout; stopping the control plane")
		teardown()
	})
	return func() { timer.Stop() }
}

// configureLogging keeps the tools' own logs quiet unless SYNCMEDIC_TESTENV_LOG asks for them
// (debug|info|warn|error): by default Argo CD's logrus logs only fatal errors and controller-runtime only errors.
func configureLogging() {
	level := os.Getenv("SYNCMEDIC_TESTENV_LOG")
	argoLevel := logrus.FatalLevel
	slogLevel := slog.LevelError
	if level != "" {
		if l, err := logrus.ParseLevel(level); err == nil {
			argoLevel = l
		}
		_ = slogLevel.UnmarshalText([]byte(level))
	}
	logrus.SetLevel(argoLevel)
	// Loggers Argo CD builds itself (util/log.NewLogrusLogger) read their level from ARGOCD_LOG_LEVEL.
	if os.Getenv("ARGOCD_LOG_LEVEL") == "" {
		_ = os.Setenv("ARGOCD_LOG_LEVEL", argoLevel.String())
	}
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slogLevel})))
}

// register records a stop function to run at teardown; the returned func runs it now (once) and forgets it.
func register(stop func()) (stopNow func()) {
	var once sync.Once
	wrapped := func() { once.Do(stop) }
	harness.mu.Lock()
	id := harness.nextID
	harness.nextID++
	harness.stops[id] = wrapped
	harness.order = append(harness.order, id)
	harness.mu.Unlock()
	return func() {
		harness.mu.Lock()
		delete(harness.stops, id)
		harness.mu.Unlock()
		wrapped()
	}
}

// teardown runs every registered stop function, newest first. Safe to call more than once and concurrently.
func teardown() {
	harness.mu.Lock()
	var fns []func()
	for i := len(harness.order) - 1; i >= 0; i-- {
		if fn, ok := harness.stops[harness.order[i]]; ok {
			fns = append(fns, fn)
		}
	}
	harness.stops = map[int]func(){}
	harness.order = nil
	harness.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// requireMain fails the test when the binary has no TestMain calling Main: without it nothing would stop the
// shared control plane and its processes would outlive `go test`.
func requireMain(t testing.TB) {
	t.Helper()
	harness.mu.Lock()
	ok := harness.inMain
	harness.mu.Unlock()
	if !ok {
		t.Fatal("testenv: this package needs `func TestMain(m *testing.M) { testenv.Main(m) }` so the control plane is stopped after the tests")
	}
}

// skipShort skips tests that need real processes under `go test -short`.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: needs the real control plane; skipped under -short")
	}
}

// Polling defaults for the package's own tests (require.Eventually).
const (
	defaultWait = 30 * time.Second
	pollEvery   = 50 * time.Millisecond
)

// stopOnSignal tears the control plane down and exits 2 on SIGINT or SIGTERM, until the returned function is
// called.
func stopOnSignal() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "testenv: %v received, stopping the control plane\n", sig)
			teardown()
			os.Exit(2)
		case <-done:
		}
	}()
	return func() { close(done); signal.Stop(sigs) }
}
