package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Node is a real Kubernetes node of the test environment: Debian's containerd and runc run its Pods, a kubelet
// v1.31.0 registers it, and a kube-scheduler places Pods on it, against a control plane of its own (kube-apiserver,
// etcd, kube-controller-manager: the embedded Env) so the tests that play the kubelet on Kube and
// KubeWithControllers never see it. The kubelet, containerd and every Pod live in a network namespace the node
// creates, with no route out: the node's address exists only there, the kubelet reaches the apiserver through a
// forwarder from the namespace's loopback to the host's, and the apiserver reaches the kubelet (logs, exec) and Pods
// through its egress selector and an HTTP CONNECT proxy that dials inside the namespace. A kube-proxy (iptables
// mode) in the namespace routes Services' ClusterIPs for Pods, the `kubernetes` Service's to a forwarder at the
// node's address that leads to the apiserver; CoreDNS, a process in the namespace behind the kube-system/kube-dns
// Service, resolves the cluster domain for them (and nothing else). Images are built locally
// (NodePauseImage, NodeBusyboxImage) and never pulled.
type Node struct {
	*Env
	// Name is the node's name; IP its InternalIP (only inside its network namespace).
	Name, IP string
	// Dir holds the node's configuration, containerd's root and state, the kubelet's root and the logs.
	Dir string
	// NetnsPath is the bind mount of the node's network namespace (/run/netns/<name>).
	NetnsPath string
	// ContainerdSocket is the node's containerd API socket (for ctr -a).
	ContainerdSocket string
	// KubeletLog, ContainerdLog, SchedulerLog, KubeProxyLog and CoreDNSLog are the daemons' log files.
	KubeletLog, ContainerdLog, SchedulerLog, KubeProxyLog, CoreDNSLog string

	netnsName string
	host      hostState
	// stops are run by Stop in order: processes, proxies, then the host's state.
	stops     []func()
	stopOnce  sync.Once
	stopErr   error
	removeDir func()
	// lock is the machine's node lock, released at the end of Stop.
	lock *nodeLock
	// webhookOnce imports NodeWebhookImage on first use (WebhookImage).
	webhookOnce sync.Once
	webhookErr  error
	// fluxOnce installs Flux as Pods on first use (InstallFlux).
	fluxOnce sync.Once
	fluxErr  error
	// argoCDOnce installs Argo CD as Pods on first use (InstallArgoCD).
	argoCDOnce sync.Once
	argoCDErr  error
}

const (
	nodeIP       = "10.123.0.2"
	nodeName     = "syncmedic-node"
	podSubnet    = "10.88.0.0/24"
	cniBinDir    = "/usr/lib/cni"
	busyboxPath  = "/bin/busybox"
	nodeStartMax = 6 * time.Minute // all of it: apiserver, CRDs, controller-manager, images, Ready; the machine is shared
)

// NodeControllers are the kube-controller-manager controllers next to a real node: those of KubeWithControllers;
// the node lifecycle controller, which lifts the not-ready taint a new node is admitted with
// (TaintNodesByCondition); and the endpoints and EndpointSlice controllers, so a Service's endpoints follow its
// Pods (an admission webhook backend Deployment scaled to zero or rolled out); the StatefulSet controller (Argo
// CD's application controller is one).
var NodeControllers = append(append([]string(nil), ControllerManagerControllers...), "node-lifecycle-controller",
	"endpoints-controller", "endpointslice-controller", "statefulset-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "root-ca-certificate-publisher-controller")

// Host paths the kubelet, containerd or go-cni hard-code, whatever their configured directories: removed at Stop
// when the node created them.
var nodeHostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/usr/libexec/kubernetes",
	"/run/containerd", "/opt/containerd", "/etc/cni"}

// Sysctls the kubelet sets at start (setupKernelTunables): restored once the node is Ready and at Stop.
var nodeSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// Top-level cgroups the kubelet (cgroupfs driver) and containerd create in every hierarchy.
var nodeCgroups = []string{"kubepods", "k8s.io"}

// hostState is what the host had before the node started, so Stop removes only what the node added.
type hostState struct {
	paths   map[string]bool
	netnsDi bool
	sysctls map[string]string
	cgroups map[string]bool
}

var sharedNode struct {
	mu   sync.Mutex
	node *Node
	err  error
	// users counts the running tests of RealNodeWhileUsed; pinned says a RealNode caller keeps the node until the
	// binary ends; idle stops an unused node (RealNodeWhileUsed).
	users  int
	pinned bool
	idle   *time.Timer
}

// RealNode returns the real node shared by the test binary, starting it (and its control plane) on first use; it
// is stopped at teardown (RealNodeWhileUsed stops it earlier). It skips under -short and fails when `make tools` has
// not installed what it needs, when the node cannot start (not root, say), or when another test binary's node still
// runs after nodeLockWait: only one real node can run on a machine at a time (the kubelet's cgroups and host paths
// are global), so a second one waits for the machine's lock (nodeLockPath).
func RealNode(t testing.TB) *Node {
	t.Helper()
	n := realNode(t)
	sharedNode.mu.Lock()
	sharedNode.pinned = true
	sharedNode.mu.Unlock()
	return n
}

// realNode returns the shared node, starting it when none runs (RealNode, RealNodeWhileUsed).
func realNode(t testing.TB) *Node {
	t.Helper()
	skipShort(t)
	requireMain(t)
	s := &sharedNode
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle != nil { // a test wants the node again before it stopped for being idle
		s.idle.Stop()
		s.idle = nil
	}
	if s.node == nil && s.err == nil {
		s.node, s.err = startNode(context.Background())
	}
	if s.err != nil {
		t.Fatalf("testenv: starting the real node: %v", s.err)
	}
	return s.node
}

// stopSharedNode stops the shared node now (the next RealNode starts a new one) and returns it with Stop's error.
func stopSharedNode() (*Node, error) {
	s := &sharedNode
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node
	s.node, s.pinned = nil, false
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	if n == nil {
		return nil, errors.New("no real node is running")
	}
	return n, n.Stop()
}

// startNode starts the control plane, the network namespace, containerd, the images, the scheduler and the
// kubelet, and waits until the node is Ready. On failure it stops whatever it started.
func startNode(ctx context.Context) (_ *Node, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if err := checkNodeTools(bin); err != nil {
		return nil, err
	}
	lockCtx, cancelLock := context.WithTimeout(ctx, nodeLockWait)
	defer cancelLock()
	lock, err := acquireNodeLock(lockCtx, nodeLockPath)
	if err != nil {
		return nil, err
	}
	// The start's own budget begins once the machine's node is this binary's.
	ctx, cancel := context.WithTimeout(ctx, nodeStartMax)
	defer cancel()
	// A binary killed with its node gave the lock back at once; its reaper may still be removing the cgroups.
	for deadline := time.Now().Add(time.Minute); kubepodsLeft() && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
	host, err := recordHost()
	if err != nil {
		lock.release()
		return nil, err
	}
	dir, removeDir, err := tempDir("node-")
	if err != nil {
		lock.release()
		return nil, err
	}
	// n, not the result: the deferred clean-up below must see the node when startNode returns nil.
	n := &Node{Name: nodeName, IP: nodeIP, Dir: dir, host: host, netnsName: "syncmedic-node-" + randomHex(4)}
	n.NetnsPath = "/run/netns/" + n.netnsName
	n.ContainerdSocket = filepath.Join(dir, "containerd", "containerd.sock")
	n.removeDir = removeDir
	n.lock = lock
	unregister := register(func() {
		if err := n.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the real node: %v\n", err)
		}
	})
	defer func() {
		if err != nil {
			unregister()
		}
	}()
	for _, step := range []func(context.Context, string) error{
		n.createNetns, n.startControlPlane, n.writeConfig, n.startContainerd, n.importImages, n.startScheduler, n.startKubelet,
		n.startKubeProxy, n.startCoreDNS,
	} {
		if err := step(ctx, bin); err != nil {
			return nil, err
		}
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w\nkubelet log:\n%s", err, tail(n.KubeletLog, 40))
	}
	if err := n.waitServices(ctx); err != nil {
		return nil, err
	}
	// The kubelet has set its kernel tunables by now; the host gets its own back.
	if err := restoreSysctls(n.host.sysctls); err != nil {
		return nil, err
	}
	if err := n.reapOnDeath(); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "testenv: real node Ready %s after this test binary took the machine's node\n",
		time.Since(lock.since).Round(time.Second))
	return n, nil
}

// reapOnDeath gives the reaper a script that does what Stop does, for a test binary that dies without running
// teardown (SIGKILL): the reaper has killed the daemons' process groups by then; the script kills the shims and the
// Pods' processes, unmounts, deletes the namespace and the cgroups, restores the sysctls and removes the host paths
// the node created. Stop removes the script.
func (n *Node) reapOnDeath() error {
	root, err := harnessRoot()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "D=%q\n", n.Dir)
	b.WriteString(`for f in $(grep -l -s -F "$D" /proc/[0-9]*/cmdline) $(grep -l -s ':/kubepods' /proc/[0-9]*/cgroup); do
  p=${f#/proc/}; kill -KILL "${p%%/*}" 2>/dev/null
done
sleep 1
awk '{print $5}' /proc/self/mountinfo | grep -e "^$D/" | sort -r | while read -r m; do umount -l "$m"; done
`)
	fmt.Fprintf(&b, "ip netns del %q\n", n.netnsName)
	if !n.host.netnsDi {
		b.WriteString(`[ -z "$(ls -A /run/netns)" ] && umount -l /run/netns && rmdir /run/netns` + "\n")
	}
	for _, h := range cgroupHierarchies() {
		for _, c := range nodeCgroups {
			if top := filepath.Join(h, c); !n.host.cgroups[top] {
				fmt.Fprintf(&b, "[ -d %q ] && find %q -depth -type d -exec rmdir {} \\; \n", top, top)
			}
		}
	}
	for k, v := range n.host.sysctls {
		fmt.Fprintf(&b, "echo %q > %q\n", v, filepath.Join("/proc/sys", k))
	}
	for _, p := range nodeHostPaths {
		if !n.host.paths[p] {
			fmt.Fprintf(&b, "rm -rf -- %q\n", p)
		}
	}
	fmt.Fprintf(&b, "rm -rf -- \"$D\"\n")
	script := filepath.Join(root, "node-down-"+n.netnsName+".sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o700); err != nil {
		return err
	}
	n.stops = append([]func(){func() { _ = os.Remove(script) }}, n.stops...)
	return reapLater("sh", script)
}

// checkNodeTools reports what `make tools` has not installed.
func checkNodeTools(bin string) error {
	var missing []string
	for _, p := range []string{filepath.Join(bin, "kubelet"), filepath.Join(bin, "kube-scheduler"),
		filepath.Join(bin, "kube-controller-manager"), filepath.Join(bin, "kube-proxy"), filepath.Join(bin, "coredns"),
		filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"),
		busyboxPath} {
		if !isExecutable(p) {
			missing = append(missing, p)
		}
	}
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip", "iptables", "conntrack"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run `make tools` first", strings.Join(missing, ", "))
	}
	return nil
}

// recordHost records the host's state the node changes, and refuses to start beside another node.
func recordHost() (hostState, error) {
	h := hostState{paths: map[string]bool{}, sysctls: map[string]string{}, cgroups: map[string]bool{}}
	for _, p := range nodeHostPaths {
		if _, err := os.Stat(p); err == nil {
			h.paths[p] = true
		}
	}
	_, err := os.Stat("/run/netns")
	h.netnsDi = err == nil
	for _, k := range nodeSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return h, fmt.Errorf("reading sysctl %s: %w", k, err)
		}
		h.sysctls[k] = strings.TrimSpace(string(v))
	}
	for _, c := range cgroupDirs() {
		h.cgroups[c] = true
		if filepath.Base(c) == "kubepods" {
			return h, fmt.Errorf("%s exists: another kubelet runs on this machine (one real node at a time); retry when it stopped", c)
		}
	}
	return h, nil
}

// kubepodsLeft reports whether a kubelet's top-level cgroup exists in any hierarchy.
func kubepodsLeft() bool {
	for _, c := range cgroupDirs() {
		if filepath.Base(c) == "kubepods" {
			return true
		}
	}
	return false
}

// cgroupDirs lists the node's top-level cgroups (nodeCgroups) present in any hierarchy.
func cgroupDirs() []string {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		for _, c := range nodeCgroups {
			if fi, err := os.Stat(filepath.Join(h, c)); err == nil && fi.IsDir() {
				dirs = append(dirs, filepath.Join(h, c))
			}
		}
	}
	return dirs
}

// cgroupHierarchies lists where a top-level cgroup may be: every hierarchy under /sys/fs/cgroup (v1 and the
// unified one of a hybrid host), and /sys/fs/cgroup itself (a cgroup v2 host).
func cgroupHierarchies() []string {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	return append(hierarchies, "/sys/fs/cgroup")
}

// createNetns creates the node's network namespace: loopback up and a veth pair with both ends inside, the node's
// address on one; no route leads out.
func (n *Node) createNetns(ctx context.Context, _ string) error {
	if b, err := runCmd(ctx, "ip", "netns", "add", n.netnsName); err != nil {
		return fmt.Errorf("ip netns add: %w\n%s", err, b)
	}
	script := fmt.Sprintf("ip link set lo up && ip link add node0 type veth peer name node0p && "+
		"ip addr add %s/24 dev node0 && ip link set node0p up && ip link set node0 up", n.IP)
	if b, err := runIn(ctx, n.NetnsPath, "sh", "-c", script); err != nil {
		return fmt.Errorf("configuring the node's network namespace: %w\n%s", err, b)
	}
	return nil
}

// startControlPlane starts the node's kube-apiserver (cluster traffic through the egress proxy into the namespace,
// kubelets reached at their InternalIP), etcd and kube-controller-manager, and the forwarder that makes the
// apiserver reachable from inside the namespace at the same address as on the host.
func (n *Node) startControlPlane(_ context.Context, _ string) error {
	sock := filepath.Join(n.Dir, "egress.sock")
	stopProxy, err := serveEgressProxy(sock, n.NetnsPath)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	n.stops = append(n.stops, stopProxy)
	egress := filepath.Join(n.Dir, "egress-selector.yaml")
	if err := os.WriteFile(egress, []byte(egressSelectorConfig(sock)), 0o600); err != nil {
		return err
	}
	apiserverLog, err := os.Create(filepath.Join(n.Dir, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	n.stops = append(n.stops, func() { _ = apiserverLog.Close() })
	certDir := filepath.Join(n.Dir, "apiserver")
	caPEM, err := writeAPIServerCerts(certDir, n.IP)
	if err != nil {
		return fmt.Errorf("the apiserver's certificates: %w", err)
	}
	// The audit log records every request (level Metadata): the install tests prove with it what syncmedic's
	// ServiceAccount did and was granted.
	audit, err := auditFlags(n.Dir)
	if err != nil {
		return err
	}
	env, err := startKube(func(te *envtest.Environment) {
		te.CRDInstallOptions.MaxTime = time.Minute // the default 10 s is too short on a loaded machine
		api := te.ControlPlane.GetAPIServer()
		api.Out, api.Err = apiserverLog, apiserverLog
		api.CertDir, api.SecureServing.CA = certDir, caPEM
		// The apiserver calls a webhook's Service at one of its endpoints' addresses (enable-aggregator-routing), a
		// Pod's on the node's bridge, through the egress proxy: kube-proxy routes ClusterIPs inside the node's
		// namespace, not on the host. It advertises the node's address as the endpoint of the `kubernetes` Service,
		// where a forwarder inside the namespace leads to it, so Pods reach it through the Service's ClusterIP.
		api.Configure().
			Set("advertise-address", n.IP).
			Set("egress-selector-config-file", egress).
			Set("kubelet-preferred-address-types", "InternalIP").
			Set("enable-aggregator-routing", "true").
			// As a cluster's apiserver: the kubelet is authorized by the Node authorizer and NodeRestriction (it
			// reads only what its Pods reference), and ServiceAccount admission gives every Pod a ServiceAccount
			// and its projected token (envtest disables it).
			Set("authorization-mode", "Node,RBAC").
			Set("enable-admission-plugins", "NodeRestriction").
			Disable("disable-admission-plugins")
		for k, v := range audit {
			api.Configure().Set(k, v)
		}
	})
	if env != nil {
		n.stops = append(n.stops, env.stopControlPlane)
	}
	if err != nil {
		return fmt.Errorf("kube-apiserver and etcd: %w\n%s", err, tail(apiserverLog.Name(), 30))
	}
	n.Env = env
	env.node = n
	env.AuditLog = audit["audit-log-path"]
	// The ServiceAccount controllers make each namespace's default ServiceAccount (without it ServiceAccount
	// admission refuses Pods) and legacy token Secrets; the publisher puts the cluster CA in each namespace's
	// kube-root-ca.crt, which every projected token volume mounts.
	if err := env.startControllerManager(NodeControllers,
		"--root-ca-file="+filepath.Join(certDir, clusterCAFile),
		"--service-account-private-key-file="+filepath.Join(certDir, saSignerKeyFile)); err != nil {
		return err
	}
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		return err
	}
	for _, listen := range []string{u.Host, net.JoinHostPort(n.IP, u.Port())} {
		stopForward, err := forwardIntoNetns(n.NetnsPath, listen, u.Host)
		if err != nil {
			return err
		}
		n.stops = append(n.stops, stopForward)
	}
	return nil
}

// stopControlPlane stops e's processes now, newest first.
func (e *Env) stopControlPlane() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// writeConfig writes containerd's, the CNI's and the kubelet's configuration, and the kubelet's kubeconfig.
func (n *Node) writeConfig(_ context.Context, _ string) error {
	for _, d := range []string{"containerd/root", "containerd/state", "cni/conf", "cni/ipam", "kubelet", "podlogs", "img"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o700); err != nil {
			return err
		}
	}
	// The kubelet's identity as in a cluster: the Node authorizer and NodeRestriction judge it.
	user, err := n.te.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	// The user the bootstrap RBAC policy binds to system:node-proxier, as kubeadm's kube-proxy is.
	proxyUser, err := n.te.AddUser(envtest.User{Name: "system:kube-proxy"}, nil)
	if err != nil {
		return err
	}
	proxyKubeconfig, err := proxyUser.KubeConfig()
	if err != nil {
		return err
	}
	files := map[string]string{
		"containerd/config.toml":              containerdConfig(n.Dir),
		"cni/conf/10-syncmedic-node.conflist": cniConfig(n.Dir),
		"kubelet-config.yaml":                 kubeletConfig(n.Dir, n.IP),
		"resolv.conf":                         "nameserver 127.0.0.1\n",
		"kubelet.kubeconfig":                  string(kubeconfig),
		"kube-proxy.kubeconfig":               string(proxyKubeconfig),
		"kube-proxy-config.yaml":              kubeProxyConfig(n.Dir, n.Name),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startDaemon starts argv inside the node's network namespace, logging to Dir/name.log, stopped by Stop.
func (n *Node) startDaemon(name string, argv ...string) (logPath string, exited <-chan struct{}, err error) {
	logPath = filepath.Join(n.Dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + n.NetnsPath}, argv...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stop, exited, err := startProcess(cmd, 15*time.Second)
	if err != nil {
		_ = logFile.Close()
		return "", nil, err
	}
	_ = reapLater("pg", strconv.Itoa(cmd.Process.Pid))
	n.stops = append(n.stops, func() { stop(); _ = logFile.Close() })
	return logPath, exited, nil
}

// startContainerd starts containerd with the node's configuration and waits until it answers.
func (n *Node) startContainerd(ctx context.Context, _ string) error {
	logPath, exited, err := n.startDaemon("containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd/config.toml"))
	if err != nil {
		return err
	}
	n.ContainerdLog = logPath
	n.stops = append(n.stops, n.removeContainers)
	for {
		if _, err := n.ctr(ctx, "version"); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("containerd exited while starting:\n%s", tail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer: %w\n%s", ctx.Err(), tail(logPath, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ctr runs containerd's ctr against the node's containerd, in the CRI's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	return runCmd(ctx, append([]string{"ctr", "-a", n.ContainerdSocket, "-n", "k8s.io"}, args...)...)
}

// importImages builds the pause and busybox images and imports them into containerd.
func (n *Node) importImages(ctx context.Context, _ string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	pause, err := pauseImage(ctx, root, filepath.Join(n.Dir, "img"))
	if err != nil {
		return err
	}
	busybox, err := busyboxImage(ctx, busyboxPath)
	if err != nil {
		return err
	}
	for name, img := range map[string]ociImage{"pause.tar": pause, "busybox.tar": busybox} {
		p := filepath.Join(n.Dir, "img", name)
		if err := os.WriteFile(p, img.Tar, 0o600); err != nil {
			return err
		}
		if b, err := n.ctr(ctx, "images", "import", p); err != nil {
			return fmt.Errorf("importing %s: %w\n%s", name, err, b)
		}
	}
	return nil
}

// WebhookImage builds NodeWebhookImage and imports it into the node's containerd on first use, and returns its name.
func (n *Node) WebhookImage(t testing.TB) string {
	t.Helper()
	n.webhookOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		root, err := moduleRoot()
		if err != nil {
			n.webhookErr = err
			return
		}
		img, err := webhookImage(ctx, root, filepath.Join(n.Dir, "img"))
		if err != nil {
			n.webhookErr = err
			return
		}
		p := filepath.Join(n.Dir, "img", "webhook.tar")
		if err := os.WriteFile(p, img.Tar, 0o600); err != nil {
			n.webhookErr = err
			return
		}
		if b, err := n.ctr(ctx, "images", "import", p); err != nil {
			n.webhookErr = fmt.Errorf("importing the webhook image: %w\n%s", err, b)
		}
	})
	if n.webhookErr != nil {
		t.Fatalf("testenv: the webhook image: %v", n.webhookErr)
	}
	return NodeWebhookImage
}

// ImportImage imports an image archive (an OCI image layout as a tar, named by its index.json's
// io.containerd.image.name annotation, as internal/ociimage writes it) into the node's containerd, where Pods run it
// with imagePullPolicy Never or IfNotPresent; file names the archive in the node's directory.
func (n *Node) ImportImage(t testing.TB, file string, archive []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := n.importImage(ctx, file, archive); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

func (n *Node) importImage(ctx context.Context, file string, archive []byte) error {
	p := filepath.Join(n.Dir, "img", filepath.Base(file))
	if err := os.WriteFile(p, archive, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if b, err := n.ctr(ctx, "images", "import", p); err != nil {
		return fmt.Errorf("importing %s into the node's containerd: %w\n%s", file, err, b)
	}
	return nil
}

// startScheduler runs bin/kube-scheduler beside the apiserver, on the host's loopback.
func (n *Node) startScheduler(_ context.Context, bin string) error {
	logPath := filepath.Join(n.Dir, "kube-scheduler.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, "kube-scheduler"), "--kubeconfig="+n.Kubeconfig, "--leader-elect=false",
		"--secure-port=0", "--v=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stop, _, err := startProcess(cmd, 10*time.Second)
	if err != nil {
		_ = logFile.Close()
		return err
	}
	_ = reapLater("pg", strconv.Itoa(cmd.Process.Pid))
	n.stops = append(n.stops, func() { stop(); _ = logFile.Close() })
	n.SchedulerLog = logPath
	return nil
}

// startKubelet runs bin/kubelet inside the namespace.
func (n *Node) startKubelet(_ context.Context, bin string) error {
	logPath, _, err := n.startDaemon("kubelet", filepath.Join(bin, "kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet-config.yaml"),
		"--kubeconfig="+filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP,
		"--volume-plugin-dir="+filepath.Join(n.Dir, "kubelet/volume-plugins"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet/pki"), "--v=1")
	n.KubeletLog = logPath
	return err
}

// startKubeProxy runs bin/kube-proxy (iptables mode) inside the namespace: its chains are the namespace's and go
// with it at Stop.
func (n *Node) startKubeProxy(_ context.Context, bin string) error {
	logPath, _, err := n.startDaemon("kube-proxy", filepath.Join(bin, "kube-proxy"),
		"--config="+filepath.Join(n.Dir, "kube-proxy-config.yaml"), "--v=1")
	n.KubeProxyLog = logPath
	return err
}

// waitReady waits until the node is Ready and schedulable (the node lifecycle controller lifted the not-ready taint).
func (n *Node) waitReady(ctx context.Context) error {
	for {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && nodeReady(node) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready and untainted: %w (last: %v)", n.Name, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitServices waits until kube-proxy has programmed the Services (its /healthz answers 200) and CoreDNS has read
// them (its /ready answers 200), both on the namespace's loopback, so a Pod started next reaches Services by
// ClusterIP and name at once.
func (n *Node) waitServices(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dialInNetns(n.NetnsPath, addr) },
	}}
	for _, check := range []struct{ url, log string }{
		{"http://127.0.0.1:10256/healthz", n.KubeProxyLog}, {"http://127.0.0.1:18181/ready", n.CoreDNSLog},
	} {
		for {
			resp, err := client.Get(check.url)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("status %s", resp.Status)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not ready: %w (last: %v)\n%s", check.url, ctx.Err(), err, tail(check.log, 20))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Stop tears the node down and leaves nothing behind: the kubelet, the containers and their shims, containerd, the
// scheduler and the control plane stopped by PID, mounts under Dir, the network namespace, the kubelet's cgroups,
// its sysctls restored, the host paths it created and Dir removed. It returns what was left nevertheless.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		if n.Env != nil {
			stopStacksOn(n.Env) // the Argo CD stacks on its control plane first: they would only log its absence
		}
		// Newest first: kubelet, scheduler, containers, containerd, the control plane, the proxies.
		for i := len(n.stops) - 1; i >= 0; i-- {
			n.stops[i]()
		}
		n.killShims()
		var errs []error
		errs = append(errs, n.unmountAll(), n.deleteNetns(), removeCgroups(n.host.cgroups), restoreSysctls(n.host.sysctls))
		for _, p := range nodeHostPaths {
			if !n.host.paths[p] {
				errs = append(errs, os.RemoveAll(p))
			}
		}
		n.removeDir()
		if left := n.Leftovers(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
		}
		n.stopErr = errors.Join(errs...)
		n.lock.release()
	})
	return n.stopErr
}

// removeContainers kills and removes every task and container of the node's containerd (its socket only).
func (n *Node) removeContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tasks, _ := n.ctr(ctx, "tasks", "ls", "-q")
	for _, t := range strings.Fields(string(tasks)) {
		_, _ = n.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", t)
	}
	for _, t := range strings.Fields(string(tasks)) {
		for i := 0; i < 20; i++ {
			// containerd's CRI plugin deletes a task itself when it sees it exit: then it is gone ("failed to load
			// task"), which used to cost this loop its 5 s per task.
			if out, err := n.ctr(ctx, "tasks", "rm", "-f", t); err == nil || bytes.Contains(out, []byte("failed to load task")) ||
				bytes.Contains(out, []byte("not found")) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	containers, _ := n.ctr(ctx, "containers", "ls", "-q")
	for _, c := range strings.Fields(string(containers)) {
		_, _ = n.ctr(ctx, "containers", "rm", c)
	}
}

// nodeProcesses returns the pids of processes that belong to the node: their command line names its directory or
// namespace, or they run in a cgroup of the kubelet's.
func (n *Node) nodeProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cgroup, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		// recordHost refused to start beside another kubelet, so every process in a kubepods cgroup is the node's.
		if bytes.Contains(cmdline, []byte(n.Dir)) || bytes.Contains(cmdline, []byte(n.netnsName)) ||
			bytes.Contains(cgroup, []byte(":/kubepods")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killShims kills what is left of the node's processes: containerd's shims (started with the node's socket) and
// anything still in the kubelet's cgroups.
func (n *Node) killShims() {
	for i := 0; i < 20; i++ {
		pids := n.nodeProcesses()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeMounts returns the mount points under Dir and of the node's namespace, deepest first.
func (n *Node) nodeMounts() []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if strings.HasPrefix(f[4], n.Dir+"/") || f[4] == n.Dir || f[4] == n.NetnsPath {
			mounts = append(mounts, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	return mounts
}

// unmountAll detaches every mount under Dir (container root file systems, shm, pod volumes, sandbox namespaces).
func (n *Node) unmountAll() error {
	var errs []error
	for _, m := range n.nodeMounts() {
		if m == n.NetnsPath {
			continue
		}
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// deleteNetns deletes the node's network namespace, and /run/netns when `ip netns` created it for the node.
func (n *Node) deleteNetns() error {
	if _, err := os.Stat(n.NetnsPath); err == nil {
		if b, err := runCmd(context.Background(), "ip", "netns", "del", n.netnsName); err != nil {
			return fmt.Errorf("ip netns del %s: %w\n%s", n.netnsName, err, b)
		}
	}
	if n.host.netnsDi {
		return nil
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil && len(entries) == 0 {
		_ = syscall.Unmount("/run/netns", syscall.MNT_DETACH)
		return os.Remove("/run/netns")
	}
	return nil
}

// removeCgroups removes the node's top-level cgroups that were not there before, deepest first.
func removeCgroups(before map[string]bool) error {
	var errs []error
	for _, top := range cgroupDirs() {
		if before[top] {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			var err error
			for i := 0; i < 50; i++ { // a cgroup whose last process just died may stay busy a moment
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// restoreSysctls writes the recorded values back where they differ.
func restoreSysctls(values map[string]string) error {
	var errs []error
	for k, v := range values {
		cur, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the node is still on the host: processes, mounts, the namespace, cgroups, changed
// sysctls, host paths it created, its directory. Empty after a complete Stop.
func (n *Node) Leftovers() []string {
	var left []string
	for _, pid := range n.nodeProcesses() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	for _, m := range n.nodeMounts() {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat(n.NetnsPath); err == nil {
		left = append(left, "network namespace "+n.NetnsPath)
	}
	if _, err := os.Stat("/run/netns"); err == nil && !n.host.netnsDi {
		left = append(left, "/run/netns")
	}
	for _, c := range cgroupDirs() {
		if !n.host.cgroups[c] {
			left = append(left, "cgroup "+c)
		}
	}
	for k, v := range n.host.sysctls {
		if cur, err := os.ReadFile(filepath.Join("/proc/sys", k)); err != nil || strings.TrimSpace(string(cur)) != v {
			left = append(left, fmt.Sprintf("sysctl %s=%s (was %s)", k, strings.TrimSpace(string(cur)), v))
		}
	}
	for _, p := range append(nodeHostPaths, n.Dir) {
		if _, err := os.Stat(p); err == nil && !n.host.paths[p] {
			left = append(left, "path "+p)
		}
	}
	sort.Strings(left)
	return left
}

// runCmd runs argv and returns its combined output; the error says the command failed.
func runCmd(ctx context.Context, argv ...string) ([]byte, error) {
	b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return b, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return b, nil
}
