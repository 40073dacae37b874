package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"
)

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service: the first address of envtest's
// service-cluster-ip-range (10.0.0.0/24), which the kubelet gives Pods as KUBERNETES_SERVICE_HOST.
const KubernetesServiceIP = "10.0.0.1"

// The files of the node's apiserver certificate directory: envtest's names for the serving pair and the
// ServiceAccount signing pair (sigs.k8s.io/controller-runtime v0.19.3 pkg/internal/testing/controlplane/apiserver.go
// populateAPIServerCerts, which keeps a directory that already holds apiserver.crt), and the cluster CA, which
// kube-controller-manager publishes as every namespace's kube-root-ca.crt.
const (
	apiserverCertFile = "apiserver.crt"
	apiserverKeyFile  = "apiserver.key"
	saSignerKeyFile   = "sa-signer.key"
	saSignerCertFile  = "sa-signer.crt"
	clusterCAFile     = "cluster-ca.crt"
)

// apiserverValidity is how long the node's apiserver certificates are valid: longer than any test binary runs.
const apiserverValidity = 24 * time.Hour

// apiserverNames are the names a cluster's apiserver certificate holds (kubeadm's): what in-cluster clients dial
// (the `kubernetes` Service's ClusterIP and DNS names), and what the host's clients and the kubelet dial
// (loopback, the node's address where a forwarder leads to the apiserver).
func apiserverNames(nodeIP string) ([]string, []net.IP) {
	return []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain, "localhost"},
		[]net.IP{net.ParseIP(KubernetesServiceIP), net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP)}
}

// writeAPIServerCerts fills dir, the apiserver's certificate directory, as a cluster's is: a serving certificate
// for apiserverNames signed by a new cluster CA, and a ServiceAccount signing key (P-256: the apiserver signs
// tokens ES256). envtest would make a certificate for localhost and 127.0.0.1 only, which a Pod reaching the
// apiserver through the `kubernetes` Service rejects. It returns the CA's PEM: the envtest client's trust and the
// controller-manager's --root-ca-file.
func writeAPIServerCerts(dir, nodeIP string) (caPEM []byte, err error) {
	dnsNames, ips := apiserverNames(nodeIP)
	der, key, caDER, err := issueServingCert(apiserverValidity, dnsNames, ips)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		apiserverCertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		apiserverKeyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		saSignerKeyFile:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
		saSignerCertFile:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		clusterCAFile:     caPEM,
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}
