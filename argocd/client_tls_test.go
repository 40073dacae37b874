package argocd

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// selfSignedTLS fronts target (a plaintext argocd-server) with TLS on a loopback port, using a self-signed
// certificate for 127.0.0.1 generated now — what argocd-server serves by default. It returns the address and the
// certificate's PEM file, which is also its own CA.
func selfSignedTLS(t *testing.T, target string) (addr, caFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "argocd-server", Organization: []string{"Argo CD"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		DNSNames: []string{"localhost", "argocd-server"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	caFile = filepath.Join(t.TempDir(), "tls.crt")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600))
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12,
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
	return l.Addr().String(), caFile
}

func TestDialArgoCDServerWithASelfSignedCertificate(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	tlsAddr, caFile := selfSignedTLS(t, argo.Addr)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))

	tests := []struct {
		name    string
		opts    ClientOptions
		wantErr []string
	}{
		{name: "without a CA the certificate is refused, naming --argocd-ca-file and --argocd-insecure",
			opts:    ClientOptions{ServerAddr: tlsAddr},
			wantErr: []string{"presented a certificate this client does not trust", "--argocd-ca-file", "--argocd-insecure", "x509"}},
		{name: "with the server's certificate as --argocd-ca-file the client verifies it and calls it",
			opts: ClientOptions{ServerAddr: tlsAddr, CAFile: caFile}},
		{name: "with --argocd-insecure the client skips verification and calls it",
			opts: ClientOptions{ServerAddr: tlsAddr, Insecure: true}},
		{name: "with --argocd-plaintext against an --insecure argocd-server the client calls it",
			opts: ClientOptions{ServerAddr: argo.Addr, PlainText: true}},
		{name: "TLS against an --insecure argocd-server is refused, naming --argocd-plaintext",
			opts:    ClientOptions{ServerAddr: argo.Addr},
			wantErr: []string{"hung up during the TLS handshake: if it runs with --insecure (plaintext), give --argocd-plaintext"}},
		{name: "a CA file without a certificate is refused before dialing",
			opts:    ClientOptions{ServerAddr: tlsAddr, CAFile: notPEM},
			wantErr: []string{"--argocd-ca-file " + notPEM + " holds no PEM certificate"}},
		{name: "a CA file with --argocd-insecure is refused before dialing",
			opts:    ClientOptions{ServerAddr: tlsAddr, CAFile: caFile, Insecure: true},
			wantErr: []string{"--argocd-ca-file excludes --argocd-plaintext and --argocd-insecure"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := DialContext(ctx, tt.opts)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					require.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			defer c.Close()
			_, err = c.List(ctx, &application.ApplicationQuery{})
			require.NoError(t, err, "a call through the connection")
		})
	}
}
