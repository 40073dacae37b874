package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/argocd"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

// TestServeWarnsWhenAnonymousArgoCDUsersReachTheExtension runs serve against real argocd-servers: where argocd-cm
// enables anonymous access and the default role may invoke the syncmedic extension, serve warns (with trustProxyGroups
// on, that anonymous callers can claim any group); where anonymous access is off, or the default role lacks the
// extension line, serve says it asked and that no anonymous user may invoke it.
func TestServeWarnsWhenAnonymousArgoCDUsersReachTheExtension(t *testing.T) {
	env := testenv.Kube(t)
	extensionLine := "p, role:readonly, extensions, invoke, syncmedic, allow"
	tests := []struct {
		name     string
		opts     testenv.ArgoCDOptions
		policy   string
		wantWarn string
	}{
		{"anonymous access with the extension in the default role, trustProxyGroups on",
			testenv.ArgoCDOptions{Settings: map[string]string{"users.anonymous.enabled": "true"}, DefaultRole: "role:readonly", Policy: []string{extensionLine}},
			"trustProxyGroups: true\n", argocd.AnonymousExtensionWarning(argocd.ExtensionName, true)},
		{"anonymous access with the extension in the default role",
			testenv.ArgoCDOptions{Settings: map[string]string{"users.anonymous.enabled": "true"}, DefaultRole: "role:readonly", Policy: []string{extensionLine}},
			"{}\n", argocd.AnonymousExtensionWarning(argocd.ExtensionName, false)},
		{"anonymous access off", testenv.ArgoCDOptions{DefaultRole: "role:readonly", Policy: []string{extensionLine}}, "{}\n", ""},
		{"anonymous access without the extension in the default role",
			testenv.ArgoCDOptions{Settings: map[string]string{"users.anonymous.enabled": "true"}, DefaultRole: "role:readonly"}, "{}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argo := testenv.ArgoCD(t, env, tt.opts)
			r := startServe(t, "--kubeconfig", env.Kubeconfig, "--state-file", filepath.Join(t.TempDir(), "state.json"),
				"--argocd-server", argo.Addr, "--argocd-plaintext", "--argocd-token-file", writeFile(t, "argocd-token", argo.AdminToken(t)+"\n"),
				"--policy-file", writeFile(t, "policy.yaml", tt.policy), "--flux-watch=false", "--kube-events=false")
			asked := "argocd-server lets no anonymous user invoke the syncmedic extension"
			require.Eventually(t, func() bool {
				logs := r.Logs.String()
				return strings.Contains(logs, asked) || strings.Contains(logs, "anonymous users invoke the syncmedic extension")
			}, time.Minute, 200*time.Millisecond, "serve never asked argocd-server about anonymous access")
			logs := r.Logs.String()
			if tt.wantWarn == "" {
				require.Contains(t, logs, asked)
				require.NotContains(t, logs, "anonymous users invoke the syncmedic extension")
				return
			}
			require.Contains(t, logs, jsonString(tt.wantWarn))
			require.NotContains(t, logs, asked)
		})
	}
}

// jsonString is s as it appears inside a JSON log line's string (quotes escaped), without the surrounding quotes.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
