package testenv

import (
	"testing"

	"github.com/argoproj/argo-cd/v2/util/password"
	"github.com/stretchr/testify/require"
)

func TestCmdParamEnv(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		// The names argocd-server's Deployment (manifests/base/server) maps these argocd-cmd-params-cm keys to.
		{"server.enable.proxy.extension", "ARGOCD_SERVER_ENABLE_PROXY_EXTENSION"},
		{"server.enable.gzip", "ARGOCD_SERVER_ENABLE_GZIP"},
		{"server.x.frame.options", "ARGOCD_SERVER_X_FRAME_OPTIONS"},
	} {
		t.Run(tc.key, func(t *testing.T) { require.Equal(t, tc.want, cmdParamEnv(tc.key)) })
	}
}

func TestArgoCDUIOptionsSettings(t *testing.T) {
	o := &ArgoCDUIOptions{
		Settings: map[string]string{"extension.config.syncmedic": "services: []"},
		Secrets:  map[string]string{"syncmedic.api.authorization": "Bearer x"},
		Users:    map[string]string{"alice": "pw-alice"},
	}
	cm, secrets, err := o.settings(map[string]string{"timeout.reconciliation": "10s"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"timeout.reconciliation": "10s", "extension.config.syncmedic": "services: []",
		"accounts.alice": "apiKey, login"}, cm)
	require.Equal(t, "Bearer x", secrets["syncmedic.api.authorization"])
	valid, _ := password.VerifyPassword("pw-alice", secrets["accounts.alice.password"])
	require.True(t, valid, "the password's bcrypt hash")
	require.NotEmpty(t, secrets["accounts.alice.passwordMtime"])
	require.Len(t, secrets, 3)
}
