package fluxreal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// HelmController is one helm-controller release built by hack/flux-tools.sh.
type HelmController struct {
	// Version is the release, e.g. "v1.4.3".
	Version string
	// APIVersion is the HelmRelease apiVersion its CRD stores (and the one this package creates objects with).
	APIVersion string
}

// The helm-controller releases the tests run: the newest that builds here (Flux 2.7, API v2) and the v2beta2-era
// one of Flux 2.2 (the seed incident's release).
var (
	HelmControllerV1   = HelmController{Version: "v1.4.3", APIVersion: "helm.toolkit.fluxcd.io/v2"}
	HelmControllerV037 = HelmController{Version: "v0.37.2", APIVersion: "helm.toolkit.fluxcd.io/v2beta2"}
)

// Binary is the controller's file name in bin/.
func (h HelmController) Binary() string { return "helm-controller-" + h.Version }

// CRDDir is the directory in bin/ holding the CRDs of the controller's module (config/crd/bases).
func (h HelmController) CRDDir() string { return "crds-helm-controller-" + h.Version }

// SourceControllerVersion is the source-controller release run with every helm-controller.
const SourceControllerVersion = "v1.7.3"

const (
	// SourceCRDDir is the bin/ directory of source-controller's CRDs (GitRepository, OCIRepository, Bucket, ...).
	SourceCRDDir       = "crds-source-controller"
	notificationCRDDir = "crds-flux"
	// RuntimeNamespace is the controllers' RUNTIME_NAMESPACE (where a Flux installation lives).
	RuntimeNamespace = "flux-system"
)

// Options configure a Stack.
type Options struct {
	// Helm is the helm-controller release to run (default HelmControllerV1).
	Helm HelmController
	// Notifications also starts the real notification-controller and points both controllers' --events-addr at it.
	Notifications bool
	// RequeueDependency is helm-controller's (and kustomize-controller's) --requeue-dependency; zero keeps the
	// default (30s), which the tests of dependency timing must use.
	RequeueDependency time.Duration
	// Kustomize also installs kustomize-controller v1.7.3's CRDs and starts it beside source-controller.
	Kustomize bool
	// Namespace, when set, is the one namespace the stack's controllers watch (their RUNTIME_NAMESPACE, with
	// --watch-all-namespaces=false), so that several stacks share one apiserver, each reconciling only its own
	// test's objects: the real node's control plane (testenv.RealNodeWhileUsed), where each test starts its own.
	// Empty: every namespace, the stack alone on its apiserver.
	Namespace string
}

// Stack is a running source-controller + helm-controller (+ notification-controller) against one apiserver.
type Stack struct {
	Env  *testenv.Env
	Helm HelmController
	// Source, Controller and Notification are the processes (Notification is nil without Options.Notifications).
	Source, Controller, Notification *testenv.Child
	// Kustomize is kustomize-controller (nil without Options.Kustomize).
	Kustomize *testenv.Child
	// EventsAddr is notification-controller's event listener ("" without notifications).
	EventsAddr string

	opts Options
}

var shared struct {
	once  sync.Once
	stack *Stack
	err   error
}

// Shared returns the stack shared by the tests of one binary: source-controller v1.7.3, helm-controller v1.4.3
// (with the CRDs of their own modules, replacing the ones testenv installed) and notification-controller, against
// testenv.KubeWithControllers, with helm-controller's default timings. It skips under -short.
func Shared(t testing.TB) *Stack {
	t.Helper()
	env := testenv.KubeWithControllers(t)
	shared.once.Do(func() {
		shared.stack, shared.err = start(env, Options{Helm: HelmControllerV1, Notifications: true})
	})
	if shared.err != nil {
		t.Fatalf("fluxreal: %v", shared.err)
	}
	shared.stack.logOnFailure(t)
	return shared.stack
}

// Start runs a stack on env for t alone (stopped when t ends). Use it on a private apiserver (testenv.KubePrivate):
// two helm-controllers on one apiserver would both reconcile every HelmRelease.
func Start(t testing.TB, env *testenv.Env, opts Options) *Stack {
	t.Helper()
	s, err := start(env, opts)
	if err != nil {
		t.Fatalf("fluxreal: %v", err)
	}
	t.Cleanup(s.Stop)
	s.logOnFailure(t)
	return s
}

func start(env *testenv.Env, opts Options) (*Stack, error) {
	if opts.Helm.Version == "" {
		opts.Helm = HelmControllerV1
	}
	s := &Stack{Env: env, Helm: opts.Helm, opts: opts}
	dirs := []string{SourceCRDDir, opts.Helm.CRDDir()}
	if opts.Notifications {
		dirs = append(dirs, notificationCRDDir)
	}
	if opts.Kustomize {
		dirs = append(dirs, KustomizeCRDDir)
	}
	if err := InstallCRDs(env, dirs...); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RuntimeNamespace}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", RuntimeNamespace, err)
	}
	if opts.Notifications {
		nc, addr, err := startNotificationController(env, opts)
		if err != nil {
			return nil, err
		}
		s.Notification, s.EventsAddr = nc, addr
	}
	src, err := s.startSourceController()
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Source = src
	if err := s.StartHelmController(opts.Helm); err != nil {
		s.Stop()
		return nil, err
	}
	if opts.Kustomize {
		if err := s.startKustomizeController(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Stop stops every process of the stack (kustomize- and helm-controller first).
func (s *Stack) Stop() {
	for _, c := range s.children() {
		if c != nil {
			c.Stop()
		}
	}
}

// StopHelmController stops helm-controller alone (a Flux upgrade replaces it; a HelmRelease then gets no reconciler).
func (s *Stack) StopHelmController() {
	if s.Controller != nil {
		s.Controller.Stop()
	}
}

// StartHelmController (re)starts helm-controller at release h, e.g. after UpgradeCRDs during a Flux upgrade.
func (s *Stack) StartHelmController(h HelmController) error {
	s.Helm = h
	args := []string{"--enable-leader-election=false", "--log-encoding=console", "--concurrent=8"}
	if s.EventsAddr != "" {
		args = append(args, "--events-addr=http://"+s.EventsAddr+"/")
	}
	if s.opts.RequeueDependency > 0 {
		args = append(args, "--requeue-dependency="+s.opts.RequeueDependency.String())
	}
	c, err := runController(s.Env, s.opts, h.Binary(), args)
	if err != nil {
		return err
	}
	s.Controller = c
	return nil
}

func (s *Stack) startSourceController() (*testenv.Child, error) {
	storage, err := testenv.TempDir("source-storage-")
	if err != nil {
		return nil, err
	}
	// The artifact server's port is picked free, then bound by source-controller a moment later: another process of
	// the same `make test` can take it meanwhile, and source-controller then only logs the error and serves no chart.
	// Such a start is stopped and tried again on another port.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := []string{"--enable-leader-election=false", "--log-encoding=console", "--concurrent=4",
			"--storage-path=" + storage, "--storage-addr=" + addr, "--storage-adv-addr=" + addr}
		if s.EventsAddr != "" {
			args = append(args, "--events-addr=http://"+s.EventsAddr+"/")
		}
		c, err := runController(s.Env, s.opts, "source-controller", args)
		if err != nil {
			return nil, err
		}
		if lastErr = waitArtifactServer(c, addr, 20*time.Second); lastErr == nil {
			return c, nil
		}
		c.Stop()
	}
	return nil, fmt.Errorf("source-controller: %w", lastErr)
}

// artifactServerError is what source-controller logs when its artifact server cannot listen.
const artifactServerError = "artifact server error"

// waitArtifactServer waits until source-controller's artifact server accepts connections at addr and, a moment
// later, the controller has not logged that it could not listen there (the connection then reached another process).
func waitArtifactServer(c *testenv.Child, addr string, timeout time.Duration) error {
	failed := func() bool {
		b, _ := os.ReadFile(c.LogPath)
		return bytes.Contains(b, []byte(artifactServerError))
	}
	deadline := time.Now().Add(timeout)
	for {
		if failed() {
			return fmt.Errorf("its artifact server could not listen on %s:\n%s", addr, c.Tail(5))
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			time.Sleep(500 * time.Millisecond)
			if failed() {
				return fmt.Errorf("its artifact server could not listen on %s:\n%s", addr, c.Tail(5))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its artifact server did not listen on %s within %s:\n%s", addr, timeout, c.Tail(5))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func startNotificationController(env *testenv.Env, opts Options) (*testenv.Child, string, error) {
	events, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	receiver, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	c, err := runController(env, opts, "notification-controller", []string{"--events-addr=" + events, "--receiverAddr=" + receiver, "--log-encoding=console"})
	if err != nil {
		return nil, "", err
	}
	return c, events, nil
}

// runController starts bin/name with free loopback metrics and health ports, KUBECONFIG and RUNTIME_NAMESPACE (only
// that namespace watched when opts.Namespace is set), and waits until its /readyz answers 200.

func runController(env *testenv.Env, opts Options, name string, args []string) (*testenv.Child, error) {
	bin, err := testenv.BinDir()
	if err != nil {
		return nil, err
	}
	exe := filepath.Join(bin, name)
	if _, err := os.Stat(exe); err != nil {
		return nil, fmt.Errorf("%s not found: run `make tools` (hack/flux-tools.sh) first", exe)
	}
	// The metrics and health ports are picked free and bound a moment later: when another process of the same
	// `make test` takes one meanwhile, the controller exits before it is ready, and is started again on new ports.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		metrics, err := freeAddr()
		if err != nil {
			return nil, err
		}
		health, err := freeAddr()
		if err != nil {
			return nil, err
		}
		all := []string{"--metrics-addr=" + metrics, "--health-addr=" + health}
		if opts.Namespace != "" {
			all = append(all, "--watch-all-namespaces=false")
		}
		cmd := exec.Command(exe, append(all, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig, "RUNTIME_NAMESPACE="+opts.runtimeNamespace())
		c, err := testenv.StartChild(name, cmd, 10*time.Second)
		if err != nil {
			return nil, err
		}
		err = waitReady(c, "http://"+health+"/readyz", 90*time.Second)
		if err == nil {
			return c, nil
		}
		c.Stop()
		lastErr = fmt.Errorf("%s: %w\n%s", name, err, c.Tail(40))
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, lastErr
}

// runtimeNamespace is the controllers' RUNTIME_NAMESPACE: Namespace when set, else RuntimeNamespace.
func (o Options) runtimeNamespace() string {
	if o.Namespace != "" {
		return o.Namespace
	}
	return RuntimeNamespace
}

// errExited is waitReady's answer when the process ended before it was ready.
var errExited = errors.New("exited before it was ready")

func waitReady(c *testenv.Child, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		res, err := client.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.Exited():
			return errExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s (last error: %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// crdInstalls serialises InstallCRDs: envtest creates a CRD it did not find, and a second stack starting on the
// same apiserver at that moment would fail with AlreadyExists.
var crdInstalls sync.Mutex

// InstallCRDs creates or replaces (update in place, as `kubectl apply` during a Flux upgrade) the CRDs of the
// given bin/ directories and waits until they are served.
func InstallCRDs(env *testenv.Env, dirs ...string) error {
	bin, err := testenv.BinDir()
	if err != nil {
		return err
	}
	var paths []string
	for _, d := range dirs {
		p := filepath.Join(bin, d)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s not found: run `make tools` (hack/flux-tools.sh) first", p)
		}
		paths = append(paths, p)
	}
	crdInstalls.Lock() // the stacks of parallel tests on one apiserver (the node's) would race creating the same CRD
	defer crdInstalls.Unlock()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the CRDs of %v: %w", dirs, err)
	}
	return nil
}

// logOnFailure prints the tail of every controller's log when t fails.
func (s *Stack) logOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, c := range s.children() {
			if c != nil {
				t.Logf("%s log (tail):\n%s", c.Name, c.Tail(20))
			}
		}
	})
}

// children are the stack's processes in stopping order (nil where not started).
func (s *Stack) children() []*testenv.Child {
	return []*testenv.Child{s.Kustomize, s.Controller, s.Source, s.Notification}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// PauseHelmController stops helm-controller where it is (SIGSTOP to its process group), as a node that freezes or a
// container whose process hangs would, so a test controls when it looks again; the returned resume continues it
// (SIGCONT), and runs when the test ends too. Pause only a stack of the test's own (Start): the shared one serves
// every test of the binary.
func (s *Stack) PauseHelmController(t testing.TB) (resume func()) {
	t.Helper()
	return pause(t, s.Controller)
}

// pause sends SIGSTOP to c's process group and returns the SIGCONT that resumes it (also run when t ends).
func pause(t testing.TB, c *testenv.Child) (resume func()) {
	t.Helper()
	pid := c.Pid
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("fluxreal: pausing %s: %v", c.Name, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil && err != syscall.ESRCH { // ESRCH: stopped for good since
				t.Errorf("fluxreal: resuming %s: %v", c.Name, err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}
