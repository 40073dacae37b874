package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllerManagerControllers are the kube-controller-manager controllers KubeWithControllers runs: Jobs get Pods
// and complete, finished Jobs are deleted by ttlSecondsAfterFinished, owned objects are garbage-collected, deleted
// namespaces are emptied and go away, and Deployments roll out through ReplicaSets — what a cluster does to hook
// Jobs, Helm releases and the Deployments whose health a sync waits for. There is no scheduler and no kubelet: Pods
// stay Pending (never Ready, so a Deployment never becomes available) until a test plays the kubelet (Env.Kubelet,
// Env.SetPodPhase).
var ControllerManagerControllers = []string{
	"job-controller", "ttl-after-finished-controller", "garbage-collector-controller", "namespace-controller",
	"deployment-controller", "replicaset-controller",
}

var sharedWithControllers struct {
	once sync.Once
	env  *Env
	err  error
}

// KubeWithControllers returns a second shared (per test binary) kube-apiserver + etcd, with the same CRDs as Kube,
// and a real kube-controller-manager v1.31.0 (bin/kube-controller-manager, built by `make tools`) running
// ControllerManagerControllers against it. Tests of the real Argo CD and Flux controllers use it; Kube's apiserver
// deliberately has no controllers (nothing there ever finishes terminating). It skips under -short.
func KubeWithControllers(t testing.TB) *Env {
	t.Helper()
	skipShort(t)
	requireMain(t)
	s := &sharedWithControllers
	s.once.Do(func() {
		s.env, s.err = startKube()
		if s.err == nil {
			s.err = s.env.startControllerManager(ControllerManagerControllers)
		}
	})
	if s.err != nil {
		t.Fatalf("testenv: starting kube-apiserver, etcd and kube-controller-manager: %v", s.err)
	}
	return s.env
}

// startControllerManager runs bin/kube-controller-manager with controllers (and args) against e until teardown, and waits until
// its namespace controller has removed a namespace (proof that it is connected and its controllers run).
func (e *Env) startControllerManager(controllers []string, args ...string) error {
	bin, err := BinDir()
	if err != nil {
		return err
	}
	exe := filepath.Join(bin, "kube-controller-manager")
	if !isExecutable(exe) {
		return fmt.Errorf("%s not found: run `make tools` first", exe)
	}
	dir, _, err := tempDir("kcm-")
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, append([]string{
		"--kubeconfig=" + e.Kubeconfig,
		"--controllers=" + joinComma(controllers),
		"--secure-port=0", "--leader-elect=false",
		// React within a second or two, as the tests poll: the defaults are tuned for large clusters.
		"--concurrent-gc-syncs=5", "--concurrent-job-syncs=5", "--concurrent-ttl-after-finished-syncs=5",
		"--v=1"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stop, exited, err := startProcess(cmd, 10*time.Second)
	if err != nil {
		_ = logFile.Close()
		return err
	}
	_ = reapLater("pg", strconv.Itoa(cmd.Process.Pid))
	e.stops = append(e.stops, register(func() { stop(); _ = logFile.Close() }))
	e.ControllerManagerLog = logPath
	if err := e.waitNamespaceController(exited); err != nil {
		return fmt.Errorf("kube-controller-manager: %w\n%s", err, tail(logPath, 30))
	}
	return nil
}

// waitNamespaceController creates and deletes a namespace and waits until it is gone: the namespace controller
// finalizes it only once the controller-manager has synced its informers.
func (e *Env) waitNamespaceController(exited <-chan struct{}) error {
	ctx := context.Background()
	name := uniqueName("kcm-probe")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return err
	}
	if err := e.Client.Delete(ctx, ns); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := e.Clientset.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited while starting")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a deleted namespace was not removed within 2m (last error: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func joinComma(s []string) string {
	var b bytes.Buffer
	for i, v := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v)
	}
	return b.String()
}

// tail returns the last n lines of the file at path, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
