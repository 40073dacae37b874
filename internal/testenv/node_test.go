package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/syncmedic/syncmedic/internal/ociimage"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// nodeWait bounds what a test waits for the node: Pods start in seconds, but the machine is shared.
const nodeWait = 3 * time.Minute

func busyboxPod(ns, name string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: NodeBusyboxImage, ImagePullPolicy: corev1.PullNever, Command: command,
			}},
		},
	}
}

// pollNode calls check every 100 ms until it reports done, fails the test when it returns an error (a terminal
// state other than the awaited one) or when nodeWait passes; what says the last state and the kubelet's log tail.
func pollNode(t *testing.T, n *Node, what string, check func() (done bool, err error)) {
	t.Helper()
	deadline := time.Now().Add(nodeWait)
	for {
		done, err := check()
		require.NoError(t, err, what)
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %s\nkubelet log:\n%s", what, nodeWait, tail(n.KubeletLog, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPodPhase waits until the Pod reaches phase and returns it; it fails on any other terminal phase.
func waitPodPhase(t *testing.T, n *Node, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	pollNode(t, n, "pod "+ns+"/"+name+" reaches "+string(phase), func() (bool, error) {
		p, err := n.Clientset.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		if p.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, fmt.Errorf("pod failed: %+v", p.Status)
		}
		return p.Status.Phase == phase, nil
	})
	return pod
}

func TestRealNodeReady(t *testing.T) {
	n := RealNode(t)
	node, err := n.Clientset.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, nodeReady(node), "conditions %+v, taints %+v", node.Status.Conditions, node.Spec.Taints)
	require.Contains(t, node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: nodeIP})
	require.Equal(t, "v1.31.0", node.Status.NodeInfo.KubeletVersion)
	require.True(t, strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"),
		node.Status.NodeInfo.ContainerRuntimeVersion)
	// The node's address exists only inside its namespace (no packet is sent to find out: the host's default route
	// leads out of the machine).
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		require.NotContains(t, a.String(), nodeIP+"/", "the node's address is on a host interface")
	}
	out, err := runIn(context.Background(), n.NetnsPath, "ip", "-4", "route")
	require.NoError(t, err)
	require.NotContains(t, string(out), "default", "the node's namespace has a route out:\n%s", out)
}

func TestRealNodePodEchoHiSucceedsWithLogs(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	_, err := n.Clientset.CoreV1().Pods(ns).Create(context.Background(), busyboxPod(ns, "hi", "echo", "hi"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitPodPhase(t, n, ns, "hi", corev1.PodSucceeded)
	require.Equal(t, n.Name, pod.Spec.NodeName)
	require.Len(t, pod.Status.ContainerStatuses, 1)
	term := pod.Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	require.Equal(t, int32(0), term.ExitCode)
	require.True(t, strings.HasPrefix(pod.Status.PodIP, "10.88.0."), "pod IP %q not on the node's bridge", pod.Status.PodIP)
	// The apiserver reads the logs from the kubelet, through its egress proxy into the node's namespace.
	logs, err := n.Clientset.CoreV1().Pods(ns).GetLogs("hi", &corev1.PodLogOptions{}).DoRaw(context.Background())
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(logs))
}

func TestRealNodeJobTwoCompletions(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	pod := busyboxPod(ns, "", "sh", "-c", "echo done")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: pod.Spec},
		},
	}
	_, err := n.Clientset.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	pollNode(t, n, "job "+ns+"/two completes", func() (bool, error) {
		j, err := n.Clientset.BatchV1().Jobs(ns).Get(context.Background(), "two", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %+v", c)
			}
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	pods, err := n.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=two"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		require.Equal(t, corev1.PodSucceeded, p.Status.Phase, p.Name)
		require.Equal(t, n.Name, p.Spec.NodeName, p.Name)
	}
}

// TestRealNodeCountsHookStarts runs a hook container (RealHook's script on the node) in a Job that retries it: the
// host directory counts every start (HookRuns), one line per Pod.
func TestRealNodeCountsHookStarts(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	dir := filepath.Join(n.Dir, "hooks", ns)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	runs, err := HookRuns(dir, "migrate")
	require.NoError(t, err)
	require.Empty(t, runs, "nothing ran yet")

	hook := RealHook{Name: "migrate", Run: PodFails}
	pod := busyboxPod(ns, "", "sh", "-c", hook.nodeScript())
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "hooks", MountPath: nodeHookDir}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "hooks", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: pod.Spec}},
	}
	_, err = n.Clientset.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	pollNode(t, n, "job "+ns+"/migrate fails after its retry", func() (bool, error) {
		j, err := n.Clientset.BatchV1().Jobs(ns).Get(context.Background(), "migrate", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	pods, err := n.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=migrate"})
	require.NoError(t, err)
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	runs, err = HookRuns(dir, "migrate")
	require.NoError(t, err)
	require.ElementsMatch(t, names, runs, "one start per Pod the Job ran (backoffLimit 1: two), each naming its Pod")
}

func TestRealNodeImagesAreReproducible(t *testing.T) {
	n := RealNode(t)
	ctx := context.Background()
	root, err := moduleRoot()
	require.NoError(t, err)
	a, err := pauseImage(ctx, root, t.TempDir())
	require.NoError(t, err)
	b, err := pauseImage(ctx, root, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, a.Digest, b.Digest, "two builds of the pause image differ")
	c, err := busyboxImage(ctx, busyboxPath)
	require.NoError(t, err)
	d, err := busyboxImage(ctx, busyboxPath)
	require.NoError(t, err)
	require.Equal(t, c.Digest, d.Digest, "two builds of the busybox image differ")
	// The node runs exactly these images.
	images, err := n.ctr(ctx, "images", "ls")
	require.NoError(t, err)
	digests := map[string]string{}
	for _, line := range strings.Split(string(images), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			digests[f[0]] = f[2]
		}
	}
	require.Equal(t, a.Digest, digests[NodePauseImage], "ctr images ls:\n%s", images)
	require.Equal(t, c.Digest, digests[NodeBusyboxImage], "ctr images ls:\n%s", images)
}

// TestRealNodeTearDownLeavesNothing stops the shared node while a container runs (the next RealNode starts a new
// one) and asserts that no process, mount, namespace, cgroup, sysctl change or host path of it is left.
func TestRealNodeTearDownLeavesNothing(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	_, err := n.Clientset.CoreV1().Pods(ns).Create(context.Background(), busyboxPod(ns, "sleeper", "sleep", "3600"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodPhase(t, n, ns, "sleeper", corev1.PodRunning)
	require.NotEmpty(t, n.nodeProcesses(), "no process of the node found while it runs: the leftover check would see nothing")
	require.NotEmpty(t, n.nodeMounts(), "no mount of the node found while it runs")
	require.NotEmpty(t, cgroupDirs(), "no kubepods cgroup found while the node runs")

	stopped, err := stopSharedNode()
	require.NoError(t, err)
	require.Same(t, n, stopped)
	require.Empty(t, n.Leftovers())
	require.Empty(t, n.nodeProcesses())
	require.Empty(t, n.nodeMounts())
	require.NoFileExists(t, n.NetnsPath)
	require.Empty(t, cgroupDirs())
	require.NoDirExists(t, n.Dir)
	for _, p := range nodeHostPaths {
		if !n.host.paths[p] {
			require.NoFileExists(t, p)
			require.NoDirExists(t, p)
		}
	}
	for k, v := range n.host.sysctls {
		cur, err := os.ReadFile(filepath.Join("/proc/sys", k))
		require.NoError(t, err)
		require.Equal(t, v, strings.TrimSpace(string(cur)), k)
	}
}

// TestRealNodeRunsTheAmd64ImageOfATwoPlatformLayout: a layout whose index.json points at an image index (what
// `make image PLATFORMS=linux/amd64,linux/arm64` writes, internal/ociimage) imports into containerd, which runs the
// node's platform's image from it.
func TestRealNodeRunsTheAmd64ImageOfATwoPlatformLayout(t *testing.T) {
	n := RealNode(t)
	bb, err := os.ReadFile(busyboxPath)
	require.NoError(t, err)
	image := func(arch string, busybox []byte) ociimage.Image {
		files := []imageFile{{Path: "bin/busybox", Data: busybox, Mode: 0o755}, {Path: "bin/echo", Link: "busybox"}}
		for _, d := range rootDirs {
			files = append(files, imageFile{Path: d, Dir: true})
		}
		return ociimage.Image{Gzip: true, Files: files, Config: ociimage.Config{OS: "linux", Architecture: arch,
			Entrypoint: []string{"/bin/echo"}}}
	}
	const name = "docker.io/local/two-platforms:1"
	l, err := ociimage.Build(name, time.Unix(0, 0), image("arm64", []byte("not a program")), image("amd64", bb))
	require.NoError(t, err)
	archive, err := l.Tar()
	require.NoError(t, err)
	n.ImportImage(t, "two-platforms.tar", archive)
	ns := n.Namespace(t)
	pod := busyboxPod(ns, "two", "echo", "amd64")
	pod.Spec.Containers[0].Image = name
	_, err = n.Clientset.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodPhase(t, n, ns, "two", corev1.PodSucceeded)
	logs, err := n.Clientset.CoreV1().Pods(ns).GetLogs("two", &corev1.PodLogOptions{}).DoRaw(context.Background())
	require.NoError(t, err)
	require.Equal(t, "amd64\n", string(logs))
}

// nodeRecord is what a child test binary's node was, for its parent to look for leftovers after the child is gone.
type nodeRecord struct {
	Dir, NetnsName, NetnsPath string
	Paths, Cgroups            map[string]bool
	NetnsDirExisted           bool
	Sysctls                   map[string]string
}

const nodeChildStateEnv = "SYNCMEDIC_TESTENV_NODE_CHILD_STATE"

// TestRealNodeKilledBinaryLeavesNothing SIGKILLs a test binary whose real node runs a container: no teardown runs
// there, and the reaper's clean-up script must leave nothing of the node behind.
func TestRealNodeKilledBinaryLeavesNothing(t *testing.T) {
	skipShort(t)
	if n, _ := stopSharedNode(); n != nil { // one real node per machine: the child needs the machine's
		require.Empty(t, n.Leftovers())
	}
	state := filepath.Join(t.TempDir(), "node.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealNodeKilledChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), nodeChildStateEnv+"="+state)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child must die of SIGKILL; output:\n%s", out)
	data, err := os.ReadFile(state)
	require.NoError(t, err, "child output:\n%s", out)
	var rec nodeRecord
	require.NoError(t, json.Unmarshal(data, &rec))
	n := &Node{Dir: rec.Dir, netnsName: rec.NetnsName, NetnsPath: rec.NetnsPath,
		host: hostState{paths: rec.Paths, cgroups: rec.Cgroups, netnsDi: rec.NetnsDirExisted, sysctls: rec.Sysctls}}
	left := n.Leftovers()
	for deadline := time.Now().Add(nodeWait); len(left) > 0 && time.Now().Before(deadline); left = n.Leftovers() {
		time.Sleep(time.Second) // the reaper notices the child's death within a second, then cleans up
	}
	require.Empty(t, left, "left behind by the killed binary's node")
}

// TestRealNodeKilledChild is the child of TestRealNodeKilledBinaryLeavesNothing: it starts the node and a container,
// records the node, and kills itself. Run on its own it is skipped.
func TestRealNodeKilledChild(t *testing.T) {
	path := os.Getenv(nodeChildStateEnv)
	if path == "" {
		t.Skip("helper process for TestRealNodeKilledBinaryLeavesNothing")
	}
	n := RealNode(t)
	ns := n.Namespace(t)
	_, err := n.Clientset.CoreV1().Pods(ns).Create(context.Background(), busyboxPod(ns, "sleeper", "sleep", "3600"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodPhase(t, n, ns, "sleeper", corev1.PodRunning)
	data, err := json.Marshal(nodeRecord{Dir: n.Dir, NetnsName: n.netnsName, NetnsPath: n.NetnsPath, Paths: n.host.paths,
		Cgroups: n.host.cgroups, NetnsDirExisted: n.host.netnsDi, Sysctls: n.host.sysctls})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

func TestTheNodeLockMakesASecondNodeWaitUntilTheFirstStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	first, err := acquireNodeLock(context.Background(), path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = acquireNodeLock(ctx, path)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second node must wait while the first holds the lock")
	holder, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(holder), "the lock names its holder")

	got := make(chan error, 1)
	go func() {
		second, err := acquireNodeLock(context.Background(), path)
		second.release()
		got <- err
	}()
	time.Sleep(500 * time.Millisecond)
	first.release()
	select {
	case err := <-got:
		require.NoError(t, err, "the waiting node gets the lock once the first is released")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting node did not get the lock within 10s of its release")
	}
}

// serviceClientScript is the client Pod's script. It fetches the httpd Pod's page through the Service's ClusterIP
// (SVC) and posts a SelfSubjectReview to the apiserver through the `kubernetes` Service's ClusterIP (API) with the
// Pod's ServiceAccount token, each retried until kube-proxy has routed it; then resolves both Services' names and a
// name outside the cluster domain through the cluster DNS (busybox's nslookup asks for the name as given), the short
// `kubernetes.default` with the C library's resolver and the search list of the kubelet's resolv.conf (ping prints
// the address; the ClusterIP does not answer it), and fetches both Services again by name. It prints every answer (status line and body,
// or nslookup's output) after a "== section" line. busybox's wget does not verify certificates (the test
// apiserver's serving certificate names only localhost).
const serviceClientScript = `
try() { for i in $(seq 120); do "$@" && return 0; sleep 0.5; done; return 1; }
token=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)
get() { wget -S -O /tmp/body "$1" 2>/tmp/head; }
review() {
  wget -S -O /tmp/body --no-check-certificate --header "Authorization: Bearer $token" \
    --header 'Content-Type: application/json' \
    --post-data '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' \
    "$1/apis/authentication.k8s.io/v1/selfsubjectreviews" 2>/tmp/head
}
show() { echo "== $1"; grep 'HTTP/' /tmp/head; cat /tmp/body; echo; }
lookup() { nslookup -type=A "$1" >/tmp/dns 2>&1; grep -q '^Name:' /tmp/dns; }
echo "== resolv"; cat /etc/resolv.conf
try get http://$SVC/ || exit 11; show svc
try review https://$API || exit 12; show api
try lookup web.$NS.svc.cluster.local || { cat /tmp/dns; exit 13; }; echo "== dns-svc"; cat /tmp/dns
try lookup kubernetes.default.svc.cluster.local || { cat /tmp/dns; exit 14; }; echo "== dns-api"; cat /tmp/dns
lookup example.com; echo "== dns-outside"; cat /tmp/dns
echo "== short-api"; ping -c 1 -W 1 kubernetes.default 2>&1 | head -n 1
try get http://web.$NS.svc.cluster.local/ || exit 15; show name-svc
try review https://kubernetes.default || exit 16; show name-api
`

// clientSections splits the client's output into its "== name" sections.
func clientSections(t *testing.T, logs string) map[string]string {
	t.Helper()
	sections := map[string]string{}
	for _, part := range strings.Split(logs, "== ")[1:] {
		name, body, ok := strings.Cut(part, "\n")
		require.True(t, ok, "client output:\n%s", logs)
		sections[name] = body
	}
	return sections
}

// requireReview asserts an answer of the SelfSubjectReview: 201 and the user the token names.
func requireReview(t *testing.T, answer, username string) {
	t.Helper()
	status, body, ok := strings.Cut(answer, "\n")
	require.True(t, ok, answer)
	require.Equal(t, "  HTTP/1.1 201 Created", status)
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &review), body)
	require.Equal(t, username, review.Status.UserInfo.Username)
}

// answerAddresses returns the addresses of nslookup's answer (the "Address:" lines after "Name:"), not the server's.
func answerAddresses(out string) []string {
	var addrs []string
	_, answer, _ := strings.Cut(out, "\nName:")
	for _, line := range strings.Split(answer, "\n") {
		if a, ok := strings.CutPrefix(line, "Address:"); ok {
			addrs = append(addrs, strings.TrimSpace(a))
		}
	}
	return addrs
}

// TestRealNodeServicesFromPods proves the node's Services work as a cluster's do: kube-proxy routes a Service's
// ClusterIP from one Pod to another (a busybox httpd), and the `kubernetes` Service's ClusterIP to the apiserver,
// which authenticates the Pod by its ServiceAccount token; CoreDNS resolves both Services' names to their
// ClusterIPs, answers NXDOMAIN outside the cluster domain, and the Pod reaches both by name.
func TestRealNodeServicesFromPods(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	ctx := context.Background()
	core := n.Clientset.CoreV1()

	server := busyboxPod(ns, "web", "sh", "-c", "mkdir /www && echo hello from $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www")
	server.Labels = map[string]string{"app": "web"}
	_, err := core.Pods(ns).Create(ctx, server, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	api, err := core.Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	// The apiserver advertises the node's address: the one the forwarder inside the namespace listens on.
	apiEndpoints, err := core.Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, apiEndpoints.Subsets, 1)
	require.Equal(t, []corev1.EndpointAddress{{IP: n.IP}}, apiEndpoints.Subsets[0].Addresses)

	_, err = core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	client := busyboxPod(ns, "client", "sh", "-c", serviceClientScript)
	client.Spec.ServiceAccountName = "client"
	client.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NS", Value: ns},
		{Name: "SVC", Value: svc.Spec.ClusterIP}, {Name: "API", Value: net.JoinHostPort(api.Spec.ClusterIP, "443")}}
	// The token is the one ServiceAccount admission mounts.
	created, err := core.Pods(ns).Create(ctx, client, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, hasAdmissionToken(created), "ServiceAccount admission adds the projected token volume: %+v", created.Spec.Volumes)
	var phase corev1.PodPhase
	pollNode(t, n, "the client Pod ends", func() (bool, error) {
		p, err := core.Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	logs, err := core.Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	t.Logf("client output:\n%s", logs)
	require.Equal(t, corev1.PodSucceeded, phase)

	out := clientSections(t, string(logs))
	// The kubelet's resolv.conf for a ClusterFirst Pod: the kube-dns Service and the cluster domain's search list.
	require.Contains(t, out["resolv"], "nameserver "+ClusterDNSIP+"\n")
	require.Contains(t, out["resolv"], "search "+ns+".svc."+ClusterDomain+" svc."+ClusterDomain+" "+ClusterDomain)
	require.Equal(t, "  HTTP/1.1 200 OK\nhello from web\n\n", out["svc"])
	requireReview(t, out["api"], "system:serviceaccount:"+ns+":client")
	require.Equal(t, []string{svc.Spec.ClusterIP}, answerAddresses(out["dns-svc"]), out["dns-svc"])
	require.Equal(t, []string{api.Spec.ClusterIP}, answerAddresses(out["dns-api"]), out["dns-api"])
	require.Equal(t, "PING kubernetes.default ("+api.Spec.ClusterIP+"): 56 data bytes\n", out["short-api"])
	require.Contains(t, out["dns-outside"], "NXDOMAIN")
	require.Empty(t, answerAddresses(out["dns-outside"]), out["dns-outside"])
	require.Equal(t, out["svc"], out["name-svc"])
	requireReview(t, out["name-api"], "system:serviceaccount:"+ns+":client")
}

// hasAdmissionToken reports whether ServiceAccount admission gave pod its projected token volume (kube-api-access-*,
// with the token, kube-root-ca.crt and the namespace) mounted where in-cluster clients read it.
func hasAdmissionToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if !strings.HasPrefix(v.Name, "kube-api-access-") || v.Projected == nil {
			continue
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
				return true
			}
		}
	}
	return false
}

// TestRealNodeControlPlaneIsACluster checks what the node's control plane has as a cluster's does, beyond envtest:
// the apiserver's certificate holds the `kubernetes` Service's names and ClusterIP and is signed by the CA every
// namespace gets as kube-root-ca.crt; each new namespace gets its default ServiceAccount; and the kubelet is a node,
// not an administrator (the Node authorizer and NodeRestriction): it reads a Secret only when a Pod on it mounts
// it, cannot list Secrets, and cannot set a node-restriction.kubernetes.io/ label on its Node.
func TestRealNodeControlPlaneIsACluster(t *testing.T) {
	n := RealNode(t)
	ns := n.Namespace(t)
	ctx := context.Background()
	core := n.Clientset.CoreV1()

	var rootCA *corev1.ConfigMap
	pollNode(t, n, "kube-root-ca.crt and the default ServiceAccount in a new namespace", func() (bool, error) {
		cm, err := core.ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if _, err := core.ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		rootCA = cm
		return true, nil
	})
	t.Run("the apiserver's certificate is valid for the kubernetes Service, by name and ClusterIP", func(t *testing.T) {
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM([]byte(rootCA.Data["ca.crt"])))
		u, err := url.Parse(n.Config.Host)
		require.NoError(t, err)
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots, ServerName: "kubernetes.default.svc"})
		require.NoError(t, err, "the apiserver's certificate checked against kube-root-ca.crt for kubernetes.default.svc")
		cert := conn.ConnectionState().PeerCertificates[0]
		_ = conn.Close()
		for _, name := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain, KubernetesServiceIP, n.IP, "127.0.0.1"} {
			require.NoError(t, cert.VerifyHostname(name), name)
		}
	})

	kubeletCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(n.Dir, "kubelet.kubeconfig"))
	require.NoError(t, err)
	kubelet, err := kubernetes.NewForConfig(kubeletCfg)
	require.NoError(t, err)
	mounted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mounted"}, StringData: map[string]string{"k": "v"}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, StringData: map[string]string{"k": "v"}}
	for _, s := range []*corev1.Secret{mounted, other} {
		_, err := core.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod := busyboxPod(ns, "reads-a-secret", "cat", "/s/k")
	pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: mounted.Name}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
	_, err = core.Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodPhase(t, n, ns, pod.Name, corev1.PodSucceeded)
	logs, err := core.Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", string(logs), "the kubelet read the Secret its Pod mounts")

	t.Run("the kubelet reads the Secret its Pod mounts and no other", func(t *testing.T) {
		_, err := kubelet.CoreV1().Secrets(ns).Get(ctx, mounted.Name, metav1.GetOptions{})
		require.NoError(t, err)
		_, err = kubelet.CoreV1().Secrets(ns).Get(ctx, other.Name, metav1.GetOptions{})
		require.True(t, apierrors.IsForbidden(err), "the Node authorizer refuses a Secret no Pod of the node references: %v", err)
		_, err = kubelet.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "a node cannot list Secrets: %v", err)
	})
	t.Run("NodeRestriction keeps the kubelet from labelling its Node node-restriction.kubernetes.io/", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"node-restriction.kubernetes.io/syncmedic-test":"x"}}}`)
		_, err := kubelet.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.True(t, apierrors.IsForbidden(err), "NodeRestriction refuses the label: %v", err)
		// The same client may label its Node otherwise: the refusal is NodeRestriction's, not a missing permission.
		patch = []byte(`{"metadata":{"labels":{"syncmedic-test/allowed":"x"}}}`)
		_, err = kubelet.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		patch = []byte(`{"metadata":{"labels":{"syncmedic-test/allowed":null}}}`)
		_, err = kubelet.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	})
}
