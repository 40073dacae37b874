package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServeRejectsAnUnknownHookLeakCheck(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--listen", freeAddr(t), "--argocd-server", "127.0.0.1:1",
		"--argocd-plaintext", "--argocd-hook-leak-check", "sometimes"}, &out, &errb)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errb.String(), `--argocd-hook-leak-check: hook leak check "sometimes": want auto, always or never`)
}

func TestServeHelpDocumentsTheHookLeakCheck(t *testing.T) {
	code, out, _ := runCLI(t, "serve", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "--argocd-hook-leak-check string")
	require.Contains(t, out, "v2.14.3, v3.x or later")
	require.Contains(t, out, `(default "auto")`)
}
