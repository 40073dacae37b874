package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/conformance"
	"github.com/syncmedic/syncmedic/internal/testenv"
	"github.com/syncmedic/syncmedic/internal/testenv/slackrec"
	"github.com/syncmedic/syncmedic/internal/testenv/wfreal"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// autoPolicy lets syncmedic apply the artifact-gc remedy it considers safe.
const autoPolicy = `resolveAfter: 1
rules:
  workflows/artifactgc-finalizer-stuck:
    mode: auto
`

// smallThresholds make the cluster rules judge within seconds: artifact-gc after 5s, stuck terminating after 10s
// (stuck terminating is shadowed on an object the artifact-gc rule reports).
var smallThresholds = []string{"--artifactgc-threshold", "5s", "--terminating-threshold", "10s"}

// daemon is one `syncmedic serve` process running the cluster checks on the test apiserver, announcing on a Slack
// test server.
type daemon struct {
	slack *slackrec.Server
	logs  *testenv.LockedBuffer
	bin   string
	kube  string
}

// startServe runs `syncmedic serve` with only the cluster checks (no Argo CD, no Flux), policy (YAML) and
// smallThresholds, debug logs, and Slack.
func startServe(t *testing.T, env *testenv.Env, policy string) *daemon {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	d := &daemon{slack: slackrec.New(t), logs: &testenv.LockedBuffer{}, bin: testenv.SyncmedicBinary(t), kube: env.Kubeconfig}
	addr := freeAddr(t)
	args := append([]string{"serve", "--listen", addr, "--log-format", "text", "--log-level", "debug",
		"--kubeconfig", env.Kubeconfig, "--policy-file", write("policy.yaml", policy), "--state-file", filepath.Join(dir, "state.json"),
		"--slack-token-file", write("slack-token", "xoxb-test"), "--slack-channel", "#gitops", "--slack-api-url", d.slack.GetAPIURL(),
		"--kube-events=false", "--flux-hmac-token-file", write("flux-hmac-token", "hmac-workflows")}, smallThresholds...)
	cmd := exec.Command(d.bin, args...)
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("syncmedic serve output (tail):\n%s", tailString(d.logs.String(), 12000))
			for _, p := range d.slack.All() {
				t.Logf("slack %s ts=%s thread=%s: %s", p.Method, p.TS, p.ThreadTS, p.Text)
			}
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "syncmedic serve did not become ready")
	select {
	case <-done:
		t.Fatalf("syncmedic serve exited: %s\n%s", cmd.ProcessState, d.logs.String())
	default:
	}
	return d
}

// roots are the incidents serve announced (Slack root messages).
func (d *daemon) roots() []slackrec.Message { return d.slack.Roots() }

// evaluations counts serve's cluster evaluations so far (its debug line "evaluated cluster").
func (d *daemon) evaluations() int {
	return len(regexp.MustCompile(`msg="evaluated cluster"`).FindAllStringIndex(d.logs.String(), -1))
}

// remediations are serve's log lines of the remedies it applied (its "remediation" line).
func (d *daemon) remediations() []string {
	return regexp.MustCompile(`(?m)^.*msg=remediation .*$`).FindAllString(d.logs.String(), -1)
}

// scan runs `syncmedic scan` with smallThresholds on the test apiserver and returns the findings on Workflow ns/name.
func (d *daemon) scan(t *testing.T, ns, name string) []syncmedic.Finding {
	t.Helper()
	cmd := exec.Command(d.bin, append([]string{"scan", "--kubeconfig", d.kube, "-o", "json"}, smallThresholds...)...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=")
	out, _ := cmd.Output()
	var rep syncmedic.Report
	start := bytes.IndexByte(out, '{')
	require.GreaterOrEqual(t, start, 0, "scan printed no JSON: %s", out)
	require.NoError(t, json.Unmarshal(out[start:], &rep), string(out))
	var fs []syncmedic.Finding
	for _, f := range rep.Findings {
		if f.Object.Kind == "Workflow" && f.Object.Namespace == ns && f.Object.Name == name {
			fs = append(fs, f)
		}
	}
	return fs
}

// createWorkflow creates a Workflow from YAML in ns.
func createWorkflow(t *testing.T, env *testenv.Env, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]interface{}{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj))
	wf, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
	return wf
}

// getWorkflow reads Workflow ns/name; nil when it is gone.
func getWorkflow(t *testing.T, env *testenv.Env, ns, name string) *unstructured.Unstructured {
	t.Helper()
	wf, err := env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return wf
}

// waitWorkflow waits until Workflow ns/name satisfies cond (it is passed nil once the Workflow is gone).
func waitWorkflow(t *testing.T, env *testenv.Env, ns, name string, timeout time.Duration, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var wf *unstructured.Unstructured
	deadline := time.Now().Add(timeout)
	for {
		wf = getWorkflow(t, env, ns, name)
		if cond(wf) {
			return wf
		}
		if time.Now().After(deadline) {
			t.Fatalf("Workflow %s/%s: %s not reached after %s; last: %s", ns, name, what, timeout, describe(wf))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describe is a Workflow's phase, finalizers and the shape of its node status, for messages and rows.
func describe(wf *unstructured.Unstructured) string {
	if wf == nil {
		return "gone"
	}
	phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase")
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	compressed, _, _ := unstructured.NestedString(wf.Object, "status", "compressedNodes")
	s := fmt.Sprintf("phase %s, finalizers [%s], %d nodes in status.nodes", phase, strings.Join(wf.GetFinalizers(), ", "), len(nodes))
	if compressed != "" {
		s += ", node status in status.compressedNodes" // its size varies with the timestamps: not in the row
	}
	if wf.GetDeletionTimestamp() != nil {
		s += ", deleting"
	}
	return s
}

// forced reports whether spec.artifactGC.forceFinalizerRemoval is set.
func forced(wf *unstructured.Unstructured) bool {
	if wf == nil {
		return false
	}
	v, _, _ := unstructured.NestedBool(wf.Object, "spec", "artifactGC", "forceFinalizerRemoval")
	return v
}

// hasFinalizer reports whether wf still carries the artifact-gc finalizer.
func hasFinalizer(wf *unstructured.Unstructured) bool {
	if wf == nil {
		return false
	}
	for _, f := range wf.GetFinalizers() {
		if f == testenv.ArtifactGCFinalizer {
			return true
		}
	}
	return false
}

// deleteWorkflow deletes Workflow ns/name (as `kubectl delete workflow` or `argo delete`).
func deleteWorkflow(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	require.NoError(t, env.Dynamic.Resource(testenv.WorkflowGVR).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

// podOf waits for the Pod of workflow wf whose name contains part and returns it.
func podOf(t *testing.T, env *testenv.Env, ns, wf, part string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := env.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: wfreal.LabelWorkflow + "=" + wf})
		if err != nil {
			return false
		}
		for i := range pods.Items {
			if strings.Contains(pods.Items[i].Name, part) {
				found = &pods.Items[i]
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond, "no Pod %q of Workflow %s/%s", part, ns, wf)
	return found
}

// record registers the conformance row when the test ends (also when it fails part-way: the row then says so).
func record(t *testing.T, row *conformance.Row) {
	t.Helper()
	row.Tool = "Argo Workflows"
	row.Controller = testNamespace.ReplaceAllString(row.Controller, "<ns>")
	row.Syncmedic = testNamespace.ReplaceAllString(row.Syncmedic, "<ns>")
	conformance.Record(t, *row)
}

// testNamespace matches the names testenv gives test namespaces: the test's name, a dash, six hex digits.
var testNamespace = regexp.MustCompile(`\b[a-z0-9]+(?:-[a-z0-9]+)*-[0-9a-f]{6}\b`)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
