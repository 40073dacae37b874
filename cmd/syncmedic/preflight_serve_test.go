package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestServeChecksTheArgoCDAccount runs serve against the real argocd-server: an account without `applications,
// get` keeps /readyz failing with the policy line to add, and an account that may watch but not act is warned, at
// start, that the remedies the policy sets to auto will be refused.
func TestServeChecksTheArgoCDAccount(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"blind", "viewer"},
		Policy: []string{
			"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer",
			"p, role:blind, projects, get, *, allow", "g, blind, role:blind",
		},
	})
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	policy := writeFile(t, "policy.yaml", "rules:\n  argocd/hook-finalizer-stuck:\n    mode: auto\n    projects: [default]\n")
	serve := func(t *testing.T, account string) (base string, logs *testenv.LockedBuffer) {
		r := startServe(t, "--policy-file", policy, "--state-file", filepath.Join(t.TempDir(), "state.json"),
			"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "token", argo.Token(t, account)))
		return r.Base, r.Logs
	}

	t.Run("an account that may not get applications keeps serve unready, naming the line to add", func(t *testing.T) {
		base, logs := serve(t, "blind")
		var body string
		require.Eventually(t, func() bool {
			var code int
			code, body = get(base + "/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "applications, get, */*")
		}, 30*time.Second, 50*time.Millisecond, "last /readyz: %s", body)
		require.Contains(t, body, "`p, role:syncmedic, applications, get, */*, allow`")
		require.Contains(t, logs.String(), "level=ERROR msg=\"argocd watch cannot see the applications")
	})

	t.Run("an account that may watch but not act is ready and warned that the auto remedies will be refused", func(t *testing.T) {
		base, logs := serve(t, "viewer")
		require.Eventually(t, func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond, logs.String())
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), "argocd account cannot apply every automatic remedy")
		}, 10*time.Second, 20*time.Millisecond)
		require.Contains(t, logs.String(), "`p, role:syncmedic, applications, sync, default/*, allow`")
		require.Contains(t, logs.String(), "`p, role:syncmedic, applications, update, default/*, allow`")
	})
}
