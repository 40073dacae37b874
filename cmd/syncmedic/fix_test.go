package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFixUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		mentions string
	}{
		{"fix without a fingerprint is a usage error", []string{"fix"}, exitUsage, "accepts 1 arg"},
		{"fix without a live Argo CD says which flag to give", []string{"fix", "3f9a0c2d1e4b5a67"}, exitUsage, "--argocd-server"},
		{"fix with plaintext and insecure together is refused before dialing", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext", "--argocd-insecure"}, exitUsage, "exclude each other"},
		{"fix against an unreachable Argo CD is a failed connection", []string{"fix", "3f9a0c2d1e4b5a67", "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, exitFailed, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ARGOCD_AUTH_TOKEN", "")
			code, _, errOut := runCLI(t, tt.args...)
			require.Equal(t, tt.code, code, errOut)
			require.Contains(t, errOut, tt.mentions)
		})
	}
}
