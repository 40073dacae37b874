package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestLiveScanRefusedWithoutGetPermission: argocd-server silently hides the applications an account may not get,
// so a scan with such an account would see none and say nothing is stuck. The permission preflight (CanI) makes
// scan and fix fail with exit 3 and the policy line to add instead.
func TestLiveScanRefusedWithoutGetPermission(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind", "viewer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer",
			"p, role:blind, projects, get, *, allow", "g, blind, role:blind",
		},
	})
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	dir := t.TempDir()
	blindFile, viewerFile := filepath.Join(dir, "blind-token"), filepath.Join(dir, "viewer-token")
	require.NoError(t, os.WriteFile(blindFile, []byte(argo.Token(t, "blind")), 0o600))
	require.NoError(t, os.WriteFile(viewerFile, []byte(argo.Token(t, "viewer")), 0o600))
	flags := func(tokenFile string, extra ...string) []string {
		return append([]string{"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", tokenFile,
			"--hook-finalizer-threshold", "1ms"}, extra...)
	}
	// hand-written state: see leakedHook.
	leakedHook(t, argo, "hidden")

	t.Run("an account that may get applications finds the stuck hook", func(t *testing.T) {
		require.Eventually(t, func() bool {
			code, _, _ := runCLI(t, append([]string{"scan"}, flags(viewerFile)...)...)
			return code == exitStuck
		}, 30*time.Second, 100*time.Millisecond)
	})

	tests := []struct {
		name string
		args []string
		perm string
	}{
		{"a live scan with an account that may not get applications exits 3 naming the permission and the policy line",
			append([]string{"scan"}, flags(blindFile)...), "*/*"},
		{"a live scan limited to a project names that project's line",
			append([]string{"scan"}, flags(blindFile, "--argocd-project", "default")...), "default/*"},
		{"fix with such an account exits 3 the same way",
			append([]string{"fix", "0123456789abcdef", "--yes", "--offline"}, flags(blindFile)...), "*/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			require.Equal(t, exitFailed, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Contains(t, errOut, "lacks the RBAC permission `applications, get, "+tt.perm+"`")
			require.Contains(t, errOut, "`p, role:syncmedic, applications, get, "+tt.perm+", allow`")
			require.NotContains(t, out, "No current finding", "a refused account must not be told there is nothing to fix")
		})
	}
}
