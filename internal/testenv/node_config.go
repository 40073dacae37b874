package testenv

import "strings"

// containerdConfig is the node's containerd configuration: root, state, sockets and every path under dir; the CRI
// plugin with runc, the local pause image, the CNI bridge of cniConfig, sandbox network namespaces under its state
// directory, and restrict_oom_score_adj (root lacks CAP_SYS_RESOURCE in these sandboxes: without it runc fails to
// set the sandbox's oom_score_adj=-998 with "can't get final child's PID from pipe: EOF").
func containerdConfig(dir string) string {
	return strings.ReplaceAll(`version = 2
root = "@DIR@/containerd/root"
state = "@DIR@/containerd/state"

[grpc]
  address = "@DIR@/containerd/containerd.sock"

[ttrpc]
  address = "@DIR@/containerd/containerd.sock.ttrpc"

[debug]
  address = "@DIR@/containerd/debug.sock"
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "@DIR@/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "`+NodePauseImage+`"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "`+cniBinDir+`"
    conf_dir = "@DIR@/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
`, "@DIR@", dir)
}

// cniConfig is a bridge + host-local network for the Pods (without a CNI configuration the node stays NotReady with
// "cni plugin not initialized"). The bridge lives in the node's namespace; pods route only to it.
func cniConfig(dir string) string {
	return strings.ReplaceAll(`{
  "cniVersion": "1.0.0",
  "name": "syncmedic-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "@DIR@/cni/ipam",
        "ranges": [[{"subnet": "`+podSubnet+`"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, "@DIR@", dir)
}

// kubeletConfig is the kubelet's configuration: serving on the node's address (the apiserver reaches it there),
// cgroupfs, no swap check, pod logs and resolv.conf under dir, and image garbage collection off so the local images
// are never removed (they cannot be pulled back); Pods resolve names through the node's CoreDNS (node_dns.go).
func kubeletConfig(dir, ip string) string {
	return strings.NewReplacer("@DIR@", dir, "@IP@", ip, "@DNS@", ClusterDNSIP, "@DOMAIN@", ClusterDomain).Replace(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: @IP@
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://@DIR@/containerd/containerd.sock
imageServiceEndpoint: unix://@DIR@/containerd/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
podLogsDir: @DIR@/podlogs
resolvConf: @DIR@/resolv.conf
protectKernelDefaults: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
serializeImagePulls: false
registerNode: true
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 2s
clusterDNS: [@DNS@]
clusterDomain: @DOMAIN@
`)
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode inside the node's namespace (its chains live and die
// with it), the Pods' subnet as the cluster CIDR, its health and metrics servers on the namespace's loopback, and
// conntrack left alone (maxPerCore 0 and no timeouts: those sysctls are the host's, not the namespace's), and no
// NodePorts on localhost (they would need route_localnet).
func kubeProxyConfig(dir, name string) string {
	return strings.NewReplacer("@DIR@", dir, "@NAME@", name, "@CIDR@", podSubnet).Replace(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: @NAME@
clusterCIDR: @CIDR@
clientConnection:
  kubeconfig: @DIR@/kube-proxy.kubeconfig
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 0s
`)
}
