package wfreal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// The Argo Workflows releases hack/workflows-tools.sh builds: the newest tested, and the last one that keeps the
// artifact-gc finalizer of a failed Workflow without artifacts (argo-workflows #13499, fixed by #13500 in v3.5.11
// and v3.6.0).
const (
	V362  = "v3.6.2"
	V3510 = "v3.5.10"
)

// Binary is the controller's file in bin/ for version.
func Binary(version string) string { return "workflow-controller-" + version }

// CRDDir is the directory in bin/ holding version's CRDs.
func CRDDir(version string) string { return "crds-argo-workflows-" + version }

// Options configure a Controller.
type Options struct {
	// Version is the release to run (default V362).
	Version string
	// MaxWorkflowSize is the controller's MAX_WORKFLOW_SIZE (bytes): a Workflow whose JSON is larger gets its node
	// status compressed into status.compressedNodes. Zero keeps the default (1 MiB).
	MaxWorkflowSize int
}

// Controller is one running workflow-controller managing one namespace.
type Controller struct {
	// Env is the apiserver; Namespace the namespace it manages; Install the namespace holding its ConfigMap.
	Env                *testenv.Env
	Namespace, Install string
	// Version is the release running.
	Version string
	// Process is the controller process.
	Process *testenv.Child
	cmd     *exec.Cmd
}

// configMap is the workflow-controller-configmap: an S3 artifact repository (the controller only writes its
// location into the Pods and the artifact-gc Tasks; nothing in the suite talks to it), no metrics server.
var configMap = map[string]string{
	"artifactRepository": `s3:
  bucket: artifacts
  endpoint: s3.invalid:9000
  insecure: true
  accessKeySecret: {name: s3-credentials, key: accesskey}
  secretKeySecret: {name: s3-credentials, key: secretkey}
`,
	"metricsConfig":   "enabled: false\n",
	"telemetryConfig": "enabled: false\n",
}

// Start runs a workflow-controller for namespace ns on env until t ends: it installs the controller's CRDs, writes
// its ConfigMap into a namespace of its own and waits until the controller has started its workers.
func Start(t testing.TB, env *testenv.Env, ns string, opts Options) *Controller {
	t.Helper()
	c, err := start(t, env, ns, opts)
	if err != nil {
		t.Fatalf("wfreal: %v", err)
	}
	t.Cleanup(func() {
		c.Resume() // a stopped process does not get the SIGTERM
		c.Process.Stop()
		if t.Failed() {
			t.Logf("workflow-controller log (tail):\n%s", c.Process.Tail(40))
		}
	})
	return c
}

func start(t testing.TB, env *testenv.Env, ns string, opts Options) (*Controller, error) {
	bin, err := testenv.BinDir()
	if err != nil {
		return nil, err
	}
	if opts.Version == "" {
		opts.Version = V362
	}
	exe := filepath.Join(bin, Binary(opts.Version))
	if _, err := os.Stat(exe); err != nil {
		return nil, fmt.Errorf("%s not found: run `make tools` (hack/workflows-tools.sh) first", exe)
	}
	crds := filepath.Join(bin, CRDDir(opts.Version))
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the CRDs of %s: %w", crds, err)
	}
	c := &Controller{Env: env, Namespace: ns, Install: env.Namespace(t), Version: opts.Version}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Install, Name: "workflow-controller-configmap"}, Data: configMap}
	if _, err := env.Clientset.CoreV1().ConfigMaps(c.Install).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the controller's ConfigMap: %w", err)
	}
	cmd := exec.Command(exe, "--kubeconfig", env.Kubeconfig, "--namespace", c.Install, "--namespaced",
		"--managed-namespace", ns, "--loglevel", "info", "--workflow-workers", "4", "--pod-cleanup-workers", "1")
	cmd.Env = append(os.Environ(), "LEADER_ELECTION_DISABLE=true", "DEFAULT_REQUEUE_TIME=1s")
	if opts.MaxWorkflowSize > 0 {
		cmd.Env = append(cmd.Env, "MAX_WORKFLOW_SIZE="+strconv.Itoa(opts.MaxWorkflowSize))
	}
	c.cmd = cmd
	if c.Process, err = testenv.StartChild("workflow-controller", cmd, 10*time.Second); err != nil {
		return nil, err
	}
	if err := c.waitStarted(90 * time.Second); err != nil {
		c.Process.Stop()
		return nil, fmt.Errorf("workflow-controller: %w\n%s", err, c.Process.Tail(40))
	}
	return c, nil
}

// waitStarted waits for the controller's "Starting Workflow Controller" log line (it has no readiness endpoint of
// its own port: /healthz is on the fixed :6060).
func (c *Controller) waitStarted(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if data, err := os.ReadFile(c.Process.LogPath); err == nil && strings.Contains(string(data), "Starting Workflow Controller") {
			return nil
		}
		select {
		case <-c.Process.Exited():
			return fmt.Errorf("exited before it started")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not started after %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause stops the controller process (SIGSTOP): a controller that has not got to a Workflow yet. Resume continues it.
func (c *Controller) Pause() error { return c.signal(syscall.SIGSTOP) }

// Resume continues a paused controller (SIGCONT).
func (c *Controller) Resume() error { return c.signal(syscall.SIGCONT) }

func (c *Controller) signal(sig syscall.Signal) error {
	return syscall.Kill(c.cmd.Process.Pid, sig)
}

// Passes counts the controller's passes over Workflow name so far (its "Processing workflow" log lines).
func (c *Controller) Passes(name string) int {
	data, err := os.ReadFile(c.Process.LogPath)
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `msg="Processing workflow"`) && strings.Contains(line, " workflow="+name) {
			n++
		}
	}
	return n
}
