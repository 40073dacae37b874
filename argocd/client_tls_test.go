package argocd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestDialArgoCDServerWithASelfSignedCertificate(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{DisableAuth: true})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	tlsAddr, caPEM := testenv.SelfSignedTLSFront(t, argo.Addr)
	caFile := filepath.Join(t.TempDir(), "tls.crt")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
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
