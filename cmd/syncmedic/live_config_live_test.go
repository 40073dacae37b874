package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestLiveScanFindsItsClusterAndArgoCDLikeTheCLIs runs scan against the real apiserver and argocd-server with no
// connection flag but the ones kubectl and the argocd CLI take: a kubeconfig in $KUBECONFIG whose current context
// points at a dead address beside the live one (--context picks the live one), and an `argocd login` configuration
// in $ARGOCD_CONFIG_DIR holding the server, its plaintext setting and a token.
func TestLiveScanFindsItsClusterAndArgoCDLikeTheCLIs(t *testing.T) {
	env := testenv.Kube(t)
	argo := testenv.ArgoCD(t, env, testenv.ArgoCDOptions{})
	const appName = "login-shop"
	// hand-written state: see leakedHook (the one application the Argo CD part must list).
	leakedHook(t, argo, appName)
	token := argo.AdminToken(t)
	home := isolateCLIConfig(t)

	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	require.NoError(t, err)
	live := kc.CurrentContext
	require.NotEmpty(t, live)
	kc.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: kc.Contexts[live].AuthInfo}
	kc.CurrentContext = "dead"
	twoContexts := filepath.Join(home, "two-contexts")
	require.NoError(t, clientcmd.WriteToFile(*kc, twoContexts))
	t.Setenv("KUBECONFIG", twoContexts)
	liveCluster := "cluster " + kc.Clusters[kc.Contexts[live].Cluster].Server + ": "

	// As `argocd login ADDR --plaintext` writes it: a context, a server and a user each named after the server.
	writeConfig(t, filepath.Join(home, "argocd", "config"), "current-context: "+argo.Addr+"\n"+
		"contexts:\n- name: "+argo.Addr+"\n  server: "+argo.Addr+"\n  user: "+argo.Addr+"\n"+
		"servers:\n- server: "+argo.Addr+"\n  plain-text: true\n  grpc-web-root-path: \"\"\n"+
		"users:\n- name: "+argo.Addr+"\n  auth-token: "+token+"\n")
	reads := func(r syncmedic.Report, prefix string) bool {
		return slices.ContainsFunc(r.Read, func(s string) bool { return len(s) > len(prefix) && s[:len(prefix)] == prefix })
	}
	// readsArgoCD scans and requires the Argo CD part to have listed the application: argocd-server refuses an
	// unauthenticated scan (exit 3), so this proves the login's server, plaintext setting and token were used.
	readsArgoCD := func(t *testing.T, args ...string) syncmedic.Report {
		t.Helper()
		code, r, errOut := liveReport(t, args)
		require.Contains(t, []int{exitOK, exitStuck}, code, errOut)
		require.True(t, reads(r, "argocd "+argo.Addr+": 1 applications"), "read: %v", r.Read)
		return r
	}
	t.Run("--context reads the live cluster, not the dead current context", func(t *testing.T) {
		code, r, errOut := liveReport(t, []string{"--context", live})
		require.Contains(t, []int{exitOK, exitStuck}, code, errOut)
		require.True(t, reads(r, liveCluster), "read: %v", r.Read)
		require.False(t, reads(r, "argocd "), "--context alone read Argo CD: %v", r.Read)
	})
	t.Run("--argocd-context takes server, plaintext and token from the argocd login", func(t *testing.T) {
		r := readsArgoCD(t, "--argocd-context", argo.Addr)
		require.False(t, reads(r, "cluster "), "--argocd-context alone read the cluster: %v", r.Read)
	})
	t.Run("--argocd-server without a token file takes argocd login's token for that server", func(t *testing.T) {
		readsArgoCD(t, "--argocd-server", argo.Addr, "--argocd-plaintext")
	})
	t.Run("with no source flag, both current contexts are read", func(t *testing.T) {
		kc.CurrentContext = live
		current := filepath.Join(home, "live-current")
		require.NoError(t, clientcmd.WriteToFile(*kc, current))
		t.Setenv("KUBECONFIG", current)
		r := readsArgoCD(t)
		require.True(t, reads(r, liveCluster), "read: %v", r.Read)
	})
}
