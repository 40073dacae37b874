package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v2/common"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
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

// ArgoCDOptions configures an Argo CD API server started by ArgoCD. The settings are written before the server
// starts: argocd-server restarts itself on some settings changes, which an in-process server cannot do.
type ArgoCDOptions struct {
	// DisableAuth turns authentication and RBAC enforcement off: every call is allowed without a token.
	DisableAuth bool
	// Accounts are local accounts given the apiKey capability in argocd-cm (`accounts.<name>: apiKey`); get a
	// token for one with ArgoCDServer.Token.
	Accounts []string
	// Policy holds argocd-rbac-cm policy.csv lines, e.g. "p, role:viewer, applications, get, */*, allow" and
	// "g, viewer, role:viewer". The built-in admin account always has role:admin.
	Policy []string
	// DefaultRole is argocd-rbac-cm policy.default (for example "role:readonly"); empty grants nothing.
	DefaultRole string
	// Settings are extra argocd-cm entries (for example "server.rbac.disableApplicationFineGrainedRBACInheritance").
	Settings map[string]string
	// Secrets are extra argocd-secret keys, for the "$key" references of argocd-cm (an extension backend's headers).
	Secrets map[string]string
	// ProxyExtension turns the proxy extension feature on (what argocd-server's --enable-proxy-extension,
	// server.enable.proxy.extension in argocd-cmd-params-cm, sets): requests to /extensions/<name>/ on its HTTP side
	// (the same loopback port as gRPC) are authenticated, authorized with the "applications, get" and "extensions,
	// invoke, <name>" RBAC lines and forwarded to the backend that argocd-cm extension.config names (give it in
	// Settings). argocd-server reads the extension configuration when it starts.
	ProxyExtension bool
}

// ArgoCDServer is a real argocd-server (github.com/argoproj/argo-cd/v2/server) running in-process against the
// shared apiserver and its own redis-server, serving plaintext gRPC on a loopback port. The destination cluster
// https://kubernetes.default.svc is the test apiserver (Argo CD's fake in-cluster mode with the Env's kubeconfig).
type ArgoCDServer struct {
	// Addr is the gRPC address ("127.0.0.1:port") for apiclient.ClientOptions.ServerAddr with PlainText.
	Addr string
	// Namespace is the Argo CD control-plane namespace: Applications, AppProjects and settings live here.
	Namespace string
	// Redis is the address of this server's redis-server.
	Redis string
	// Env is the apiserver the server runs against.
	Env *Env

	disableAuth    bool
	proxyExtension bool
	adminPassword  string
	cache          *appstatecache.Cache
	stopServer     func() // stops argocd-server now (also a cleanup of the test; idempotent)

	adminMu    sync.Mutex
	adminToken string // cached by visibleToServer
}

const (
	argocdAdmin        = "admin"
	redisCacheLifetime = 24 * time.Hour
)

var fakeInCluster sync.Once

// ArgoCD starts a real Argo CD API server for this test, in its own control-plane namespace, and stops it (and its
// redis-server) when the test ends. It skips under -short.
func ArgoCD(t testing.TB, env *Env, opts ArgoCDOptions) *ArgoCDServer {
	t.Helper()
	skipShort(t)
	requireMain(t)
	a := &ArgoCDServer{Env: env, Namespace: uniqueName("argocd"), disableAuth: opts.DisableAuth,
		proxyExtension: opts.ProxyExtension, adminPassword: randomHex(16)}
	if err := a.writeSettings(context.Background(), opts); err != nil {
		t.Fatalf("testenv: writing Argo CD settings: %v", err)
	}
	if err := a.addSecrets(context.Background(), opts.Secrets); err != nil {
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
	stop, err := a.start()
	for attempt := 1; err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use"); attempt++ {
		stop, err = a.start()
	}
	if err != nil {
		t.Fatalf("testenv: starting argocd-server: %v", err)
	}
	a.stopServer = stop
	t.Cleanup(stop)
	return a
}

// start runs NewServer, Init, Listen and Run (in a goroutine) and waits until the server answers gRPC.
func (a *ArgoCDServer) start() (stop func(), err error) {
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
	ports, err := FreePorts(3)
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
		Cache:                servercache.NewCache(a.cache, time.Hour, time.Hour, time.Hour),
		RepoServerCache:      repocache.NewCache(cacheClient, time.Hour, time.Hour, 10*time.Second),
		RedisClient:          redisClient,
		ContentTypes:         []string{"application/json"},
		EnableProxyExtension: a.proxyExtension,
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
	guard := newHTTP1Guard(listeners.Main)
	listeners.Main = guard
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Run(ctx, listeners)
	}()
	stop = register(func() {
		argocdStopping.Store(true)
		guard.drain(10 * time.Second)
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

// waitReady waits until Run has synced its informers and marked the server available (/healthz answers 200), so
// that stopping it later never interrupts Run's cache sync (which Argo CD treats as fatal), and the gRPC Version API
// answers.
func (a *ArgoCDServer) waitReady(done <-chan struct{}) error {
	deadline := time.Now().Add(time.Minute)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("argocd-server stopped while starting")
		default:
		}
		if lastErr = a.healthy(); lastErr == nil {
			if lastErr = a.ping(); lastErr == nil {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("argocd-server not ready after a minute: %v", lastErr)
}

func (a *ArgoCDServer) healthy() error {
	c := &http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + a.Addr + "/healthz")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz answered %s", res.Status)
	}
	return nil
}

func (a *ArgoCDServer) ping() error {
	c, err := apiclient.NewClient(&apiclient.ClientOptions{ServerAddr: a.Addr, PlainText: true})
	if err != nil {
		return err
	}
	closer, versions, err := c.NewVersionClient()
	if err != nil {
		return err
	}
	defer closer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = versions.Version(ctx, nil)
	return err
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
