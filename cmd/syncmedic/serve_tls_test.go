package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// selfSignedArgoCD fronts target (a plaintext argocd-server) with TLS on a loopback port, with a self-signed
// certificate for 127.0.0.1 made now, as argocd-server serves by default; it returns the address and the
// certificate's PEM, its own CA.
func selfSignedArgoCD(t *testing.T, target string) (addr string, caPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "argocd-server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2"}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return l.Addr().String(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestServeTalksTLSToAnArgoCDServerWithASelfSignedCertificate runs serve against the real argocd-server behind
// TLS with a self-signed certificate, the in-cluster default.
func TestServeTalksTLSToAnArgoCDServerWithASelfSignedCertificate(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"viewer"},
		Policy:   []string{"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer"},
	})
	tlsAddr, caPEM := selfSignedArgoCD(t, argo.Addr)
	caFile := writeFile(t, "tls.crt", string(caPEM))
	tokenFile := writeFile(t, "token", argo.Token(t, "viewer"))
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("ARGOCD_AUTH_TOKEN", "")

	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantCode  int
		wantReady string
	}{
		{name: "without a CA serve stays up, unready, naming --argocd-ca-file and --argocd-insecure",
			wantCode: http.StatusServiceUnavailable, wantReady: "presented a certificate this client does not trust: give --argocd-ca-file"},
		{name: "with the certificate as --argocd-ca-file serve verifies it and becomes ready",
			args: []string{"--argocd-ca-file", caFile}, wantCode: http.StatusOK, wantReady: "argocd: ok"},
		{name: "with the certificate in SYNCMEDIC_ARGOCD_CA_FILE serve becomes ready",
			env: map[string]string{"SYNCMEDIC_ARGOCD_CA_FILE": caFile}, wantCode: http.StatusOK, wantReady: "argocd: ok"},
		{name: "with --argocd-insecure serve skips verification and becomes ready",
			args: []string{"--argocd-insecure"}, wantCode: http.StatusOK, wantReady: "argocd: ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			addr, logs := freeAddr(t), &lockedBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			args := append([]string{"serve", "--listen", addr, "--log-format", "text", "--state-file", filepath.Join(t.TempDir(), "state.json"),
				"--argocd-server", tlsAddr, "--argocd-token-file", tokenFile}, tt.args...)
			go func() { done <- run(ctx, args, &lockedBuffer{}, logs) }()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					t.Error("serve did not stop after its context was cancelled")
				}
			}()
			var code int
			var body string
			require.Eventually(t, func() bool {
				code, body = get("http://" + addr + "/readyz")
				return code == tt.wantCode && strings.Contains(body, tt.wantReady)
			}, 60*time.Second, 50*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
		})
	}
	t.Run("an unreadable --argocd-ca-file is a configuration error: exit 2 naming the flag", func(t *testing.T) {
		var out, errb lockedBuffer
		code := run(context.Background(), []string{"serve", "--listen", freeAddr(t), "--argocd-server", tlsAddr,
			"--argocd-ca-file", filepath.Join(t.TempDir(), "missing.crt")}, &out, &errb)
		require.Equal(t, exitUsage, code)
		require.Contains(t, errb.String(), "--argocd-ca-file: open ")
	})
}
