package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// ClusterDNSIP is the ClusterIP of the node's kube-dns Service (kube-system), the kubelet's clusterDNS.
	ClusterDNSIP = "10.0.0.10"
	// ClusterDomain is the node's cluster domain: Services resolve as <svc>.<ns>.svc.cluster.local.
	ClusterDomain = "cluster.local"
)

// corefile is the node's CoreDNS configuration: the kubernetes plugin answers for the cluster domain; every other
// name is NXDOMAIN (nothing is forwarded: no query leaves the machine). Health and readiness listen on the
// namespace's loopback.
func corefile(dir string) string {
	return strings.NewReplacer("@DIR@", dir, "@DOMAIN@", ClusterDomain).Replace(`@DOMAIN@:53 {
    errors
    kubernetes @DOMAIN@ {
        kubeconfig @DIR@/coredns.kubeconfig
        pods insecure
        ttl 30
    }
    cache 30
    loadbalance
}
.:53 {
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    template ANY ANY {
        rcode NXDOMAIN
    }
    loop
}
`)
}

// coreDNSUser is the user CoreDNS reads the API as, with the permissions of CoreDNS's own manifests.
const coreDNSUser = "system:coredns"

// writeCoreDNSConfig writes the Corefile and CoreDNS's kubeconfig, and grants its user what the kubernetes plugin
// reads (CoreDNS's ClusterRole system:coredns).
func (n *Node) writeCoreDNSConfig(ctx context.Context) error {
	rbac := n.Clientset.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRole %s: %w", coreDNSUser, err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: coreDNSUser}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ClusterRoleBinding %s: %w", coreDNSUser, err)
	}
	user, err := n.te.AddUser(envtest.User{Name: coreDNSUser}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "coredns.kubeconfig"), kubeconfig, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "Corefile"), []byte(corefile(n.Dir)), 0o600)
}

// startCoreDNS runs bin/coredns as a process inside the node's namespace, listening on port 53 of the node's
// address, and creates the kube-dns Service (ClusterIP ClusterDNSIP, the kubelet's clusterDNS) with an
// EndpointSlice pointing at it, so kube-proxy routes Pods' queries there as a cluster routes them to its CoreDNS
// Pods.
func (n *Node) startCoreDNS(ctx context.Context, bin string) error {
	if err := n.writeCoreDNSConfig(ctx); err != nil {
		return err
	}
	logPath, _, err := n.startDaemon("coredns", filepath.Join(bin, "coredns"), "-conf", filepath.Join(n.Dir, "Corefile"))
	n.CoreDNSLog = logPath
	if err != nil {
		return err
	}
	ports := []struct {
		name     string
		protocol corev1.Protocol
	}{{"dns", corev1.ProtocolUDP}, {"dns-tcp", corev1.ProtocolTCP}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns",
			Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{ClusterIP: ClusterDNSIP},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-node",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "syncmedic-testenv"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{n.IP}, NodeName: ptr.To(n.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.protocol, Port: 53})
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.name), Protocol: ptr.To(p.protocol), Port: ptr.To[int32](53)})
	}
	if _, err := n.Clientset.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the kube-dns Service: %w", err)
	}
	if _, err := n.Clientset.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the kube-dns EndpointSlice: %w", err)
	}
	return nil
}
