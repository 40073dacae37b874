package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Argo CD versions the real-controller tests run (bin/argocd-<version>, built by hack/argocd-tools.sh).
const (
	// ArgoCDV2 is the 2.x line this project's client is built on; it never adds the hook finalizer.
	ArgoCDV2 = "v2.14.21"
	// ArgoCDV3Leaky is a 3.0 release before the hook-finalizer leak fixes of v3.0.16 (gitops-engine #761/#762/#770).
	ArgoCDV3Leaky = "v3.0.12"
	// ArgoCDV3 is the newest release that builds here: every hook gets argocd.argoproj.io/hook-finalizer.
	ArgoCDV3 = "v3.6.1"
	// argoCDCRDVersion is the version whose Application, AppProject and ApplicationSet CRDs are installed on an
	// apiserver that runs real Argo CD controllers (the newest: see installArgoCDCRDs).
	argoCDCRDVersion = ArgoCDV3
)

// ArgoCDStackOptions configures ArgoCDStack.
type ArgoCDStackOptions struct {
	// Version picks bin/argocd-<Version> (e.g. "v3.6.1"); required.
	Version string
	// Accounts are local accounts given the apiKey capability (see ArgoCDOptions.Accounts). Stacks are shared: the
	// first caller's options win for a version (an Env keeps one stack per version).
	Accounts []string
	// AppResync is the application-controller's --app-resync: how often it re-compares every application (default
	// 10s, so tests see a refresh quickly; Argo CD's own default is 180s).
	AppResync time.Duration
	// ControllerLogLevel is the application-controller's --loglevel (default "debug", which the tests' failure
	// output relies on; "info" for a benchmark of thousands of applications).
	ControllerLogLevel string
	// StatusProcessors and OperationProcessors are the controller's --status-processors and
	// --operation-processors (default 4 each; Argo CD's own defaults are 20 and 10).
	StatusProcessors, OperationProcessors int
	// UI makes argocd-server serve Argo CD's web UI with extensions (ArgoCDUIOptions); a stack with UI options is
	// started for them alone, not shared with the version's other tests.
	UI *ArgoCDUIOptions
	// Own starts a stack for the calling test alone (its own namespace, redis and processes), for a test that stops
	// the application-controller for longer than the other tests of the version could bear.
	Own bool
}

// RealArgoCD is a real Argo CD control plane run as processes from one version's multi-call binary:
// argocd-server (plaintext gRPC and HTTP on a loopback port, --insecure), argocd-application-controller and
// argocd-repo-server, with their own redis-server and control-plane namespace, against an Env's apiserver (the
// in-cluster destination https://kubernetes.default.svc is that apiserver, through ARGOCD_FAKE_IN_CLUSTER). It
// embeds an ArgoCDServer describing the argocd-server process, so the API helpers (AdminToken, Token,
// Applications, CreateApplication, CountOperations) work on it; the helpers that write Argo CD's cache or an
// Application's status by hand (SetResources, SetOperationState...) are not for a stack: its controller owns them.
//
// One stack per version is started per Env and shared by every test of the binary: tests give their Applications
// unique names (RealHookApp does).
type RealArgoCD struct {
	*ArgoCDServer
	// Version is the Argo CD version running, e.g. "v3.6.1".
	Version string
	// Dir holds the processes' logs and working directories.
	Dir string
	// StartedIn is how long the stack took to start (settings, redis, three processes, all ready).
	StartedIn time.Duration
	// Logs maps a component name (argocd-server, argocd-application-controller, argocd-repo-server) to its log file.
	Logs map[string]string
	// pids maps a component name to the process ID of the process it runs as (the leader of its process group).
	pids map[string]int
	// stops stop redis-server and the processes now, oldest first (stopStacksOn runs them newest first).
	stops []func()
	// exe, envv and repoServer start a component later (argocd-applicationset-controller: appSets starts it once,
	// StartApplicationSetController).
	exe        string
	envv       []string
	repoServer string
	// serverExe, serverEnv and serverArgs start another argocd-server of the stack (StartServerReplica).
	serverExe  string
	serverEnv  []string
	serverArgs func(ports []int) []string
	appSets    sync.Once
	appSetsErr error
}

var stacks struct {
	mu   sync.Mutex
	byID map[string]*stackEntry
	crds map[*Env]*sync.Once
	err  map[*Env]error
}

type stackEntry struct {
	env   *Env
	once  sync.Once
	stack *RealArgoCD
	err   error
}

// stopStacksOn stops the Argo CD stacks started on env now (its control plane is about to stop: the real node's,
// RealNodeWhileUsed) and forgets them.
func stopStacksOn(env *Env) {
	stacks.mu.Lock()
	var entries []*stackEntry
	for key, e := range stacks.byID {
		if e.env == env {
			entries = append(entries, e)
			delete(stacks.byID, key)
		}
	}
	delete(stacks.crds, env)
	delete(stacks.err, env)
	stacks.mu.Unlock()
	for _, e := range entries {
		e.once.Do(func() { e.err = fmt.Errorf("the control plane of this stack stopped") })
		if e.stack == nil {
			continue
		}
		for i := len(e.stack.stops) - 1; i >= 0; i-- {
			e.stack.stops[i]()
		}
	}
}

// ArgoCDStack returns the real Argo CD stack of opts.Version on env, starting it on first use (it stays up until the
// test binary ends). Use it with KubeWithControllers' Env: hooks are Jobs that must run. On a failing test it logs
// the tail of each component's log. It skips under -short.
func ArgoCDStack(t testing.TB, env *Env, opts ArgoCDStackOptions) *RealArgoCD {
	t.Helper()
	skipShort(t)
	requireMain(t)
	if opts.Version == "" {
		t.Fatal("testenv: ArgoCDStackOptions.Version is required")
	}
	stacks.mu.Lock()
	if stacks.byID == nil {
		stacks.byID, stacks.crds, stacks.err = map[string]*stackEntry{}, map[*Env]*sync.Once{}, map[*Env]error{}
	}
	key := fmt.Sprintf("%p/%s", env, opts.Version)
	if opts.UI != nil {
		key += fmt.Sprintf("/ui%p", opts.UI)
	}
	if opts.Own {
		key += fmt.Sprintf("/own%p", t)
	}
	entry := stacks.byID[key]
	if entry == nil {
		entry = &stackEntry{env: env}
		stacks.byID[key] = entry
	}
	crdOnce := stacks.crds[env]
	if crdOnce == nil {
		crdOnce = &sync.Once{}
		stacks.crds[env] = crdOnce
	}
	stacks.mu.Unlock()

	crdOnce.Do(func() {
		err := installArgoCDCRDs(env)
		stacks.mu.Lock()
		stacks.err[env] = err
		stacks.mu.Unlock()
	})
	stacks.mu.Lock()
	crdErr := stacks.err[env]
	stacks.mu.Unlock()
	if crdErr != nil {
		t.Fatalf("testenv: installing the Argo CD %s CRDs: %v", argoCDCRDVersion, crdErr)
	}
	entry.once.Do(func() { entry.stack, entry.err = startArgoCDStack(env, opts) })
	if entry.err != nil {
		t.Fatalf("testenv: starting Argo CD %s: %v", opts.Version, entry.err)
	}
	s := entry.stack
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range argoCDComponents {
				n := 10
				if c == "argocd-application-controller" {
					n = 30
				}
				t.Logf("testenv: last lines of Argo CD %s %s (%s):\n%s", s.Version, c, s.Logs[c], tail(s.Logs[c], n))
			}
		}
	})
	return s
}

// argoCDComponents are the processes of a stack, in start order.
var argoCDComponents = []string{"argocd-repo-server", "argocd-application-controller", "argocd-server"}

// ArgoCDBinary is bin/argocd-<version>, built by `make tools-argocd`.
func ArgoCDBinary(version string) (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	exe := filepath.Join(bin, "argocd-"+version)
	if !isExecutable(exe) {
		return "", fmt.Errorf("%s not found: run `make tools-argocd` first", exe)
	}
	return exe, nil
}

// installArgoCDCRDs replaces the Application, AppProject and ApplicationSet CRDs testenv installed (argo-cd/v2's,
// from bin/crds) with the newest tested version's (bin/crds-argocd-v3.6.1): the apiserver is shared by every version
// in the binary, and a CRD is cluster-wide. That is what an upgrade leaves behind (Argo CD never downgrades its
// CRDs), and it is safe for v2.14 and v3.0: the v3.6 schemas are a superset of theirs — every field v2.14.21 writes
// is in them (TestArgoCDCRDsKeepOlderVersionsFields checks it field by field), so nothing an older controller writes
// is pruned.
func installArgoCDCRDs(env *Env) error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(bin, "crds-argocd-"+argoCDCRDVersion)
	if _, err := os.Stat(filepath.Join(dir, "application-crd.yaml")); err != nil {
		return fmt.Errorf("%s not found: run `make tools-argocd` first", dir)
	}
	crds, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir},
		ErrorIfPathMissing: true, MaxTime: time.Minute, PollInterval: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	// InstallCRDs waits for the CRDs to be served; wait also for the update to be the served schema.
	ctx := context.Background()
	for _, c := range crds {
		deadline := time.Now().Add(time.Minute)
		for {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := env.Client.Get(ctx, clientKey("", c.Name), got); err != nil {
				return err
			}
			if got.Generation == c.Generation || established(got) && got.Generation >= c.Generation {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not updated within a minute", c.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// startArgoCDStack writes the settings, starts redis-server and the three processes, and waits until each is ready.
func startArgoCDStack(env *Env, opts ArgoCDStackOptions) (*RealArgoCD, error) {
	begin := time.Now()
	exe, err := ArgoCDBinary(opts.Version)
	if err != nil {
		return nil, err
	}
	bin, _ := BinDir()
	hack := filepath.Join(bin, "argocd-"+opts.Version+"-hack")
	if !isExecutable(filepath.Join(hack, "git-verify-wrapper.sh")) {
		return nil, fmt.Errorf("%s/git-verify-wrapper.sh not found: run `make tools-argocd` first", hack)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("git not found: run `make tools-argocd` (installs the Debian git package)")
	}
	dir, _, err := tempDir("argocd-" + opts.Version + "-")
	if err != nil {
		return nil, err
	}
	server := &ArgoCDServer{Env: env, Namespace: uniqueName("argocd-" + strings.ReplaceAll(opts.Version, ".", "-")),
		adminPassword: randomHex(16)}
	ctx := context.Background()
	// Reconcile every 10 s instead of 3 min: the tests change git and wait for the controller.
	settings := map[string]string{"timeout.reconciliation": "10s"}
	if opts.UI != nil {
		err = opts.UI.applySettings(ctx, server, opts.Accounts, settings)
	} else {
		err = server.writeSettings(ctx, ArgoCDOptions{Accounts: opts.Accounts, Settings: settings})
	}
	if err != nil {
		return nil, fmt.Errorf("writing settings: %w", err)
	}
	if err := createDefaultProject(ctx, env, server.Namespace); err != nil {
		return nil, fmt.Errorf("creating AppProject default: %w", err)
	}
	redisAddr, stopRedis, err := startRedis()
	if err != nil {
		return nil, err
	}
	server.Redis = redisAddr
	s := &RealArgoCD{ArgoCDServer: server, Version: opts.Version, Dir: dir, Logs: map[string]string{}, pids: map[string]int{},
		stops: []func(){stopRedis}}

	// Every component gets the same environment: the fake in-cluster destination is the test apiserver, git runs
	// through Argo CD's wrapper scripts, GPG is off, and the TLS/SSH/GPG data directories exist and are empty.
	envv := append(os.Environ(),
		"KUBECONFIG="+env.Kubeconfig, "ARGOCD_FAKE_IN_CLUSTER=true",
		"PATH="+hack+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "TMPDIR="+dir, "ARGOCD_GPG_ENABLED=false",
		"ARGOCD_CONTROLLER_REPLICAS=1", "ARGOCD_RECONCILIATION_JITTER=0",
		"GIT_CONFIG_NOSYSTEM=1")
	for _, d := range []string{"tls", "ssh", "gnupg", "gpg-data"} {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		envv = append(envv, map[string]string{"tls": "ARGOCD_TLS_DATA_PATH", "ssh": "ARGOCD_SSH_DATA_PATH",
			"gnupg": "ARGOCD_GNUPGHOME", "gpg-data": "ARGOCD_GPG_DATA_PATH"}[d]+"="+p)
	}
	logging := []string{"--redis", redisAddr, "--logformat", "text", "--loglevel"}
	kube := []string{"--namespace", server.Namespace}

	// repo-server: plaintext gRPC (--disable-tls) on a loopback port. Since v3.6 it also defaults --client-ca-path
	// (mTLS), which it refuses together with --disable-tls: empty it where the flag exists.
	repoFlags := []string{"--disable-tls"}
	helpCmd := exec.Command(exe, "--help")
	helpCmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd-repo-server")
	if help, _ := helpCmd.CombinedOutput(); strings.Contains(string(help), "--client-ca-path") {
		repoFlags = append(repoFlags, "--client-ca-path=")
	}
	repoAddr, err := s.startComponent(exe, envv, "argocd-repo-server", func(ports []int) []string {
		return append(append([]string{"--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports[1])}, repoFlags...), append(logging, "info")...)
	}, func(ports []int, exited <-chan struct{}) error {
		return waitTCP(loopback(ports[0]), exited, 2*time.Minute)
	})
	if err != nil {
		return nil, err
	}
	s.exe, s.envv, s.repoServer = exe, envv, repoAddr
	// application-controller: its metrics port serves /healthz once it runs.
	resync, controllerLog, statusProcs, opProcs := 10*time.Second, "debug", 4, 4
	if opts.AppResync > 0 {
		resync = max(opts.AppResync, time.Second)
	}
	if opts.ControllerLogLevel != "" {
		controllerLog = opts.ControllerLogLevel
	}
	if opts.StatusProcessors > 0 {
		statusProcs = opts.StatusProcessors
	}
	if opts.OperationProcessors > 0 {
		opProcs = opts.OperationProcessors
	}
	if _, err := s.startComponent(exe, envv, "argocd-application-controller", func(ports []int) []string {
		return append([]string{"--repo-server", repoAddr, "--repo-server-plaintext",
			"--metrics-port", strconv.Itoa(ports[0]), "--app-resync", strconv.Itoa(int(resync / time.Second)), "--self-heal-timeout-seconds", "2",
			"--status-processors", strconv.Itoa(statusProcs), "--operation-processors", strconv.Itoa(opProcs)},
			append(append(logging, controllerLog), kube...)...)
	}, func(ports []int, exited <-chan struct{}) error {
		return waitHTTP("http://"+loopback(ports[0])+"/healthz", exited, 2*time.Minute)
	}); err != nil {
		return nil, err
	}
	// argocd-server: plaintext (--insecure) gRPC and HTTP on one loopback port.
	serverArgs := func(ports []int) []string {
		return append([]string{"--insecure", "--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--metrics-port", strconv.Itoa(ports[1]), "--repo-server", repoAddr, "--repo-server-plaintext",
			"--dex-server", "http://127.0.0.1:1", "--staticassets", dir}, append(append(logging, "info"), kube...)...)
	}
	serverExe, serverEnv := exe, envv
	if opts.UI != nil {
		var wrap func([]string) []string
		if serverExe, serverEnv, wrap, err = opts.UI.server(opts.Version, envv); err != nil {
			return nil, err
		}
		plain := serverArgs
		serverArgs = func(ports []int) []string { return wrap(plain(ports)) }
	}
	s.serverExe, s.serverEnv, s.serverArgs = serverExe, serverEnv, serverArgs
	addr, err := s.startComponent(serverExe, serverEnv, "argocd-server", serverArgs, func(ports []int, exited <-chan struct{}) error {
		if err := waitHTTP("http://"+loopback(ports[0])+"/healthz", exited, 2*time.Minute); err != nil {
			return err
		}
		server.Addr = loopback(ports[0])
		return server.ping()
	})
	if err != nil {
		return nil, err
	}
	server.Addr = addr
	s.StartedIn = time.Since(begin)
	return s, nil
}

// startComponent runs exe as component (ARGOCD_BINARY_NAME) with the flags args(ports) on free loopback ports,
// logging to Dir/<component>.log, and waits with ready; a port taken meanwhile by another process means a new start
// on new ports (StartOnFreePorts). It returns the address of the first port.
func (s *RealArgoCD) startComponent(exe string, envv []string, component string, args func(ports []int) []string,
	ready func(ports []int, exited <-chan struct{}) error) (string, error) {
	return s.startComponentOn(2, exe, envv, component, args, ready)
}

// startComponentOn is startComponent on n free ports.
func (s *RealArgoCD) startComponentOn(n int, exe string, envv []string, component string, args func(ports []int) []string,
	ready func(ports []int, exited <-chan struct{}) error) (string, error) {
	logPath := filepath.Join(s.Dir, component+".log")
	s.Logs[component] = logPath
	c, ports, err := StartOnFreePorts(FreePortsOptions{Name: component, Ports: n,
		Start: func(ports []int) (PortChild, error) {
			return startLogged(exe, args(ports), append(append([]string(nil), envv...), "ARGOCD_BINARY_NAME="+component), s.Dir, logPath)
		},
		Ready: func(ports []int, c PortChild) error { return ready(ports, c.Exited()) },
	})
	if err != nil {
		return "", err
	}
	p := c.(*loggedProcess)
	s.pids[component] = p.pid
	s.stops = append(s.stops, p.Stop)
	return loopback(ports[0]), nil
}

// loggedProcess is a process that appends its output to a log file shared by its restarts; Output reads only what
// this start wrote.
type loggedProcess struct {
	pid     int
	logPath string
	offset  int64
	exited  <-chan struct{}
	stop    func()
}

// startLogged starts exe with args, env and dir, appending its output to logPath, registered for teardown.
func startLogged(exe string, args, env []string, dir, logPath string) (*loggedProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := logFile.Stat()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stop, exited, err := startProcess(cmd, 10*time.Second)
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	_ = reapLater("pg", strconv.Itoa(cmd.Process.Pid))
	return &loggedProcess{pid: cmd.Process.Pid, logPath: logPath, offset: fi.Size(), exited: exited,
		stop: register(func() { stop(); _ = logFile.Close() })}, nil
}

// Exited implements PortChild.
func (p *loggedProcess) Exited() <-chan struct{} { return p.exited }

// Stop implements PortChild.
func (p *loggedProcess) Stop() { p.stop() }

// Output implements PortChild: the log from this start on.
func (p *loggedProcess) Output() string {
	b, _ := os.ReadFile(p.logPath)
	if int64(len(b)) < p.offset {
		return ""
	}
	return string(b[p.offset:])
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitHTTP waits until url answers 200, the process exits, or the timeout passes.
func waitHTTP(url string, exited <-chan struct{}, timeout time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		res, err := c.Get(url)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, res.Status)
		}
		select {
		case <-exited:
			return fmt.Errorf("process exited while starting")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createDefaultProject creates AppProject default (any source, any destination, every kind), as an install does;
// argocd-server would create it too, but the controller may see an Application first.
func createDefaultProject(ctx context.Context, env *Env, namespace string) error {
	proj := &v1alpha1.AppProject{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultAppProjectName, Namespace: namespace},
		Spec: v1alpha1.AppProjectSpec{
			SourceRepos:              []string{"*"},
			Destinations:             []v1alpha1.ApplicationDestination{{Server: "*", Namespace: "*"}},
			ClusterResourceWhitelist: []metav1.GroupKind{{Group: "*", Kind: "*"}},
		},
	}
	if err := env.Client.Create(ctx, proj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
