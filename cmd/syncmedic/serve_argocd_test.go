package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServeRejectsBadArgoCDLiveReadFlags(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"an unknown hook leak check is refused", []string{"--argocd-hook-leak-check", "sometimes"},
			`--argocd-hook-leak-check: hook leak check "sometimes": want auto, always or never`},
		{"zero concurrent live reads is refused", []string{"--argocd-live-reads", "0"},
			"--argocd-live-reads: 0: give at least 1"},
		{"a zero live read timeout is refused", []string{"--argocd-live-timeout", "0s"},
			"--argocd-live-timeout: 0s: give a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{"serve", "--listen", freeAddr(t), "--argocd-server", "127.0.0.1:1", "--argocd-plaintext"}, fluxTokenArgs(t)...), tc.flags...)
			code := run(context.Background(), args, &out, &errb)
			require.Equal(t, exitUsage, code)
			require.Contains(t, errb.String(), tc.want)
		})
	}
}

func TestServeHelpDocumentsTheHookLeakCheck(t *testing.T) {
	code, out, _ := runCLI(t, "serve", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "--argocd-hook-leak-check string")
	require.Contains(t, out, "v2.14.3, v3.x or later")
	require.Contains(t, out, `(default "auto")`)
	require.Contains(t, out, "--argocd-live-reads int")
	require.Contains(t, out, "--argocd-live-timeout duration")
}
