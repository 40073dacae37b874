package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	appclientset "github.com/argoproj/argo-cd/v2/pkg/client/clientset/versioned"
	repoapiclient "github.com/argoproj/argo-cd/v2/reposerver/apiclient"
	repocache "github.com/argoproj/argo-cd/v2/reposerver/cache"
	"github.com/argoproj/argo-cd/v2/server"
	servercache "github.com/argoproj/argo-cd/v2/server/cache"
	cacheutil "github.com/argoproj/argo-cd/v2/util/cache"
	appstatecache "github.com/argoproj/argo-cd/v2/util/cache/appstate"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ArgoCDExtensionOptions configure ArgoCDWithProxyExtension.
type ArgoCDExtensionOptions struct {
	ArgoCDOptions
	// Secrets are extra argocd-secret keys, for the "$key" references of extension.config (a backend's headers).
	Secrets map[string]string
}

// ArgoCDWithProxyExtension starts a real Argo CD API server like ArgoCD, with the proxy extension feature on (what
// argocd-server's --enable-proxy-extension, server.enable.proxy.extension in argocd-cmd-params-cm, sets): requests
// to /extensions/<name>/ on its HTTP side (the same loopback port as gRPC) are authenticated, authorized with the
// "applications, get" and "extensions, invoke, <name>" RBAC lines and forwarded to the backend that argocd-cm
// extension.config names (give it in Settings). argocd-server reads the extension configuration when it starts.
//
// It is ArgoCD and start with ArgoCDServerOpts.EnableProxyExtension set and extra argocd-secret keys; the two belong
// in ArgoCDOptions once argocd.go takes them.
func ArgoCDWithProxyExtension(t testing.TB, env *Env, eo ArgoCDExtensionOptions) *ArgoCDServer {
	opts := eo.ArgoCDOptions
	t.Helper()
	skipShort(t)
	requireMain(t)
	a := &ArgoCDServer{Env: env, Namespace: uniqueName("argocd"), disableAuth: opts.DisableAuth,
		adminPassword: randomHex(16)}
	if err := a.writeSettings(context.Background(), opts); err != nil {
		t.Fatalf("testenv: writing Argo CD settings: %v", err)
	}
	if err := a.addSecrets(context.Background(), eo.Secrets); err != nil {
		t.Fatalf("testenv: writing argocd-secret keys: %v", err)
	}
	// Map https://kubernetes.default.svc to the test apiserver (v1alpha1.Cluster.RawRestConfig reads these).
	fakeInCluster.Do(func() {
		_ = os.Setenv("ARGOCD_FAKE_IN_CLUSTER", "true")
		_ = os.Setenv("KUBECONFIG", env.Kubeconfig)
	})
	redisAddr, stopRedis, err := startRedis()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(stopRedis)
	a.Redis = redisAddr
	// The ports are free when chosen but may be taken before argocd-server listens (other test binaries run in
	// parallel): try again with new ones.
	stop, err := a.startWithProxyExtension()
	for attempt := 1; err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use"); attempt++ {
		stop, err = a.startWithProxyExtension()
	}
	if err != nil {
		t.Fatalf("testenv: starting argocd-server: %v", err)
	}
	t.Cleanup(stop)
	return a
}

// startWithProxyExtension is start with ArgoCDServerOpts.EnableProxyExtension set.
func (a *ArgoCDServer) startWithProxyExtension() (stop func(), err error) {
	kube, err := kubernetes.NewForConfig(a.Env.Config)
	if err != nil {
		return nil, err
	}
	apps, err := appclientset.NewForConfig(a.Env.Config)
	if err != nil {
		return nil, err
	}
	redisClient := redis.NewClient(&redis.Options{Addr: a.Redis})
	cacheClient := cacheutil.NewCache(cacheutil.NewRedisCache(redisClient, redisCacheLifetime, cacheutil.RedisCompressionGZip))
	a.cache = appstatecache.NewCache(cacheClient, time.Hour)
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	opts := server.ArgoCDServerOpts{
		DisableAuth: a.disableAuth, Insecure: true, Namespace: a.Namespace,
		ListenHost: "127.0.0.1", ListenPort: ports[0], MetricsHost: "127.0.0.1", MetricsPort: ports[1],
		KubeClientset: kube, AppClientset: apps, DynamicClientset: a.Env.Dynamic, KubeControllerClientset: a.Env.Client,
		// Nothing in the tests generates manifests; the repo-server address only has to be well-formed.
		RepoClientset: repoapiclient.NewRepoServerClientset(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])), 5,
			repoapiclient.TLSConfiguration{DisableTLS: true}),
		Cache:           servercache.NewCache(a.cache, time.Hour, time.Hour, time.Hour),
		RepoServerCache: repocache.NewCache(cacheClient, time.Hour, time.Hour, 10*time.Second),
		RedisClient:     redisClient,
		ContentTypes:    []string{"application/json"},
		// What argocd-server --enable-proxy-extension (server.enable.proxy.extension in argocd-cmd-params-cm) sets.
		EnableProxyExtension: true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := server.NewServer(ctx, opts, server.ApplicationSetOpts{})
	srv.Init(ctx)
	listeners, err := srv.Listen()
	if err != nil {
		argocdStopping.Store(true) // the loaders Init started fail with "context canceled" below: not a test failure
		cancel()
		_ = redisClient.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Run(ctx, listeners)
	}()
	stop = register(func() {
		argocdStopping.Store(true)
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "testenv: argocd-server did not stop within 30s")
		}
		_ = listeners.GatewayConn.Close()
		_ = redisClient.Close()
	})
	a.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	if err := a.waitReady(done); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// addSecrets adds keys to argocd-secret.
func (a *ArgoCDServer) addSecrets(ctx context.Context, keys map[string]string) error {
	if len(keys) == 0 {
		return nil
	}
	secret := &corev1.Secret{}
	if err := a.Env.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: common.ArgoCDSecretName}, secret); err != nil {
		return err
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	for k, v := range keys {
		secret.Data[k] = []byte(v)
	}
	return a.Env.Client.Update(ctx, secret)
}
