package main

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

// proxiedKubeconfig writes a copy of env's kubeconfig whose server is proxy (the certificate's 127.0.0.1 still
// matches).
func proxiedKubeconfig(t *testing.T, env *testenv.Env, proxy *testenv.Proxy) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + proxy.Addr()
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, file))
	return file
}

// TestServeStartsWhileTheStateConfigMapIsUnreachable starts serve with --state-configmap while the apiserver
// refuses connections (without --leader-elect, which would wait for leadership anyway): serve runs, unready, naming
// the state store; once the apiserver answers it loads the stored incidents, becomes ready, and announces and stores
// a stuck object.
func TestServeStartsWhileTheStateConfigMapIsUnreachable(t *testing.T) {
	env := testenv.Kube(t)
	ns := env.Namespace(t)
	apiserver, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	proxy := testenv.NewProxy(t, apiserver.Host)
	proxy.Down()
	srv := startServe(t, "--kubeconfig", proxiedKubeconfig(t, env, proxy),
		"--state-configmap", ns+"/syncmedic-state", "--flux-watch=false", "--kube-events=false",
		"--kube-stuck-kinds", "jobs.batch", "--terminating-threshold", "1s")
	base, logs := srv.Base, srv.Logs

	t.Run("with the apiserver unreachable serve runs, unready, naming the state store", func(t *testing.T) {
		var code int
		var body string
		require.Eventually(t, func() bool {
			code, body = get(base + "/readyz")
			return code == http.StatusServiceUnavailable && strings.Contains(body, "cannot load the stored incidents from ConfigMap "+ns+"/syncmedic-state")
		}, 60*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
		code, body = get(base + "/healthz")
		require.Equal(t, http.StatusOK, code, "an unreachable apiserver is not a wedged process: %s", body)
		if rc, ok := srv.exited(); ok {
			t.Fatalf("serve exited with %d:\n%s", rc, logs)
		}
	})
	t.Run("once the apiserver answers the incidents load and a stuck object is announced and stored", func(t *testing.T) {
		proxy.Up()
		job := testenv.ScenarioHookFinalizerStuck(t, env, testenv.HookJob{Namespace: ns, Name: "migrate", App: ns + "-checkout"})
		var code int
		var body string
		require.Eventually(t, func() bool {
			code, body = get(base + "/readyz")
			return code == http.StatusOK
		}, 90*time.Second, 100*time.Millisecond, "last /readyz: %d %s\nlogs:\n%s", code, body, logs)
		require.Eventually(t, func() bool {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "syncmedic-state"}, cm); err != nil {
				return false
			}
			for _, v := range cm.Data {
				if strings.Contains(v, job.Name) && strings.Contains(v, ns) {
					return true
				}
			}
			return false
		}, 60*time.Second, 100*time.Millisecond, "the incident is stored in the ConfigMap\nlogs:\n%s", logs)
		require.Contains(t, logs.String(), "stored incidents loaded")
	})
}
