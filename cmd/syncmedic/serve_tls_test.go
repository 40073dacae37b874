package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestServeTalksTLSToAnArgoCDServerWithASelfSignedCertificate runs serve against the real argocd-server behind
// TLS with a self-signed certificate, the in-cluster default.
func TestServeTalksTLSToAnArgoCDServerWithASelfSignedCertificate(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"viewer"},
		Policy:   []string{"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer"},
	})
	tlsAddr, caPEM := testenv.SelfSignedTLSFront(t, argo.Addr)
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
			addr, logs := freeAddr(t), &testenv.LockedBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			args := append([]string{"serve", "--listen", addr, "--log-format", "text", "--state-file", filepath.Join(t.TempDir(), "state.json"),
				"--argocd-server", tlsAddr, "--argocd-token-file", tokenFile}, append(fluxTokenArgs(t), tt.args...)...)
			go func() { done <- run(ctx, args, &testenv.LockedBuffer{}, logs) }()
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
	t.Run("fix takes serve's --argocd-ca-file: with it the live scan verifies the server, without it the connection is refused", func(t *testing.T) {
		const unknown = "0123456789abcdef"
		code, out, errOut := runCLI(t, "fix", unknown, "--argocd-server", tlsAddr, "--argocd-token-file", tokenFile, "--argocd-ca-file", caFile)
		require.Equal(t, exitUsage, code, "the scan ran and found no finding %s: %s%s", unknown, out, errOut)
		require.Contains(t, out+errOut, unknown)
		require.NotContains(t, out+errOut, "certificate")
		code, out, errOut = runCLI(t, "fix", unknown, "--argocd-server", tlsAddr, "--argocd-token-file", tokenFile)
		require.Equal(t, exitFailed, code, "%s%s", out, errOut)
		require.Contains(t, out+errOut, "give --argocd-ca-file")
	})
	t.Run("an unreadable --argocd-ca-file is a configuration error: exit 2 naming the flag", func(t *testing.T) {
		var out, errb testenv.LockedBuffer
		code := run(context.Background(), append([]string{"serve", "--listen", freeAddr(t), "--argocd-server", tlsAddr,
			"--argocd-ca-file", filepath.Join(t.TempDir(), "missing.crt")}, fluxTokenArgs(t)...), &out, &errb)
		require.Equal(t, exitUsage, code)
		require.Contains(t, errb.String(), "--argocd-ca-file: open ")
	})
}
