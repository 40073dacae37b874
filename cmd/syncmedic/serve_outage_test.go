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

// TestServeOutlivesArgoCDOutages runs serve against the real argocd-server behind a proxy that can refuse
// connections: Argo CD unreachable at start, then reachable, then unreachable mid-run and back. serve stays up
// throughout, /readyz names Argo CD while it is down and only then, and the Flux receiver and the cluster checks
// keep working. /readyz's status means "this pod serves its endpoints": unready at start only until
// --readiness-wait, then ready with Argo CD still down, and ready through the outage mid-run, so the Service keeps
// the pod and Flux's notification-controller can deliver.
func TestServeOutlivesArgoCDOutages(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{
		Accounts: []string{"viewer"},
		Policy:   []string{"p, role:viewer, applications, get, */*, allow", "g, viewer, role:viewer"},
	})
	proxy := testenv.NewProxy(t, argo.Addr)
	proxy.Down()
	const hmacToken = "outage-hmac-token"
	srv := startServe(t, "--kubeconfig", env.Kubeconfig, "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--flux-hmac-token-file", writeFile(t, "flux-hmac-token", hmacToken), "--argocd-server", proxy.Addr(), "--argocd-plaintext", "--argocd-token-file", writeFile(t, "token", argo.Token(t, "viewer")),
		"--readiness-wait", "15s")
	base, logs := srv.Base, srv.Logs

	steps := []struct {
		name   string
		do     func()
		ready  int
		argocd string
	}{
		{name: "with Argo CD down at start serve runs, unready for --readiness-wait, naming the unreachable argocd-server",
			ready: http.StatusServiceUnavailable, argocd: "argocd: cannot reach argocd-server " + proxy.Addr()},
		{name: "after --readiness-wait serve is ready with Argo CD still down, and /readyz still names it",
			ready: http.StatusOK, argocd: "argocd: cannot reach argocd-server " + proxy.Addr()},
		{name: "once Argo CD answers /readyz says argocd ok without a restart",
			do: proxy.Up, ready: http.StatusOK, argocd: "argocd: ok"},
		{name: "when Argo CD goes away mid-run the pod stays ready and /readyz names Argo CD again",
			do: proxy.Down, ready: http.StatusOK, argocd: "argocd: argocd "},
		{name: "when Argo CD is back serve is ready again",
			do: proxy.Up, ready: http.StatusOK, argocd: "argocd: ok"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if step.do != nil {
				step.do()
			}
			var code int
			var body string
			require.Eventually(t, func() bool {
				code, body = get(base + "/readyz")
				// The Flux watch and the cluster checks do not depend on Argo CD: they are ready at every step.
				return code == step.ready && strings.Contains(body, step.argocd) &&
					strings.Contains(body, "flux: ok\n") && strings.Contains(body, "kube: ok\n")
			}, 90*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
			require.Equal(t, http.StatusAccepted, postFluxEvent(t, base, hmacToken), "the Flux receiver answers")
			code, body = get(base + "/healthz")
			require.Equal(t, http.StatusOK, code, "an unreachable peer is not a wedged process: %s", body)
			if rc, ok := srv.exited(); ok {
				t.Fatalf("serve exited with %d:\n%s", rc, logs)
			}
		})
	}
	require.Greater(t, proxy.Refused(), 0, "serve tried argocd-server while it was down")
}

// TestServeWithARefusedTokenHoldsBackItsRollout runs serve against the real argocd-server with a token it refuses: a
// configuration error that waiting does not cure. /readyz stays 503 past --readiness-wait, naming the token, so a
// rollout with a bad Secret stops at its first new pod while the old ones serve; the pod itself still answers the
// Flux receiver.
func TestServeWithARefusedTokenHoldsBackItsRollout(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	const wait = 20 * time.Second // longer than the refusal takes, so the pod is never ready before it
	started := time.Now()
	const hmacToken = "rollout-hmac-token"
	srv := startServe(t, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--readiness-wait", wait.String(),
		"--flux-hmac-token-file", writeFile(t, "flux-hmac-token", hmacToken),
		"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "token", "not-a-token"))
	base, logs := srv.Base, srv.Logs
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = get(base + "/readyz")
		return strings.Contains(body, "not authenticated")
	}, 60*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
	time.Sleep(time.Until(started.Add(wait + 2*time.Second))) // past --readiness-wait
	code, body = get(base + "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "ready with a refused token: %s", body)
	require.Contains(t, body, "argocd: ")
	require.Contains(t, body, "--argocd-token-file")
	require.Equal(t, http.StatusAccepted, postFluxEvent(t, base, hmacToken), "the Flux receiver answers")
}
