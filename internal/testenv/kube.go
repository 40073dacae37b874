package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a shared real kube-apiserver + etcd of one test binary, with the Argo CD, Flux and Argo Workflows CRDs
// installed. Kube's has no kube-controller-manager: nothing garbage-collects owned objects, no Pod runs for a Job,
// namespaces never finish terminating, and an object with finalizers stays terminating until someone removes them —
// exactly what the stuck-resource scenarios need. KubeWithControllers' runs the real controllers.
type Env struct {
	// Config is an admin (system:masters) client configuration for the apiserver.
	Config *rest.Config
	// Client is a controller-runtime client whose scheme knows core, apps, batch, admissionregistration,
	// discovery, coordination, apiextensions, Argo CD v1alpha1 and helm-controller v2/v2beta2/v2beta1.
	Client client.Client
	// Dynamic is a dynamic client (for Argo Workflows' Workflow, which has no Go types in this module).
	Dynamic dynamic.Interface
	// Clientset is a typed client-go clientset.
	Clientset kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for the admin user (for CLIs and code that loads one).
	Kubeconfig string
	// ControllerManagerLog is the kube-controller-manager's log file (KubeWithControllers only).
	ControllerManagerLog string
	// AuditLog is the apiserver's audit log (every request at level Metadata, JSON lines: AuditCalls reads it), empty
	// when it has none: RealNode's and KubePrivateAudited's have one.
	AuditLog string

	te *envtest.Environment
	// node is the real node whose control plane this is (RealNode), nil for Kube and KubeWithControllers.
	node *Node
	// stops stop the control plane's processes (apiserver and etcd, the controller-manager, the scheduler) now
	// rather than at teardown; the real node (node.go) stops its own control plane with them.
	stops []func()
}

// Node is the real node whose control plane e is (RealNode, RealNodeWhileUsed), nil for the control planes without
// one (Kube, KubeWithControllers, KubePrivate): where a Pod can run for real.
func (e *Env) Node() *Node { return e.node }

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Kube returns the shared (per test binary) real kube-apiserver + etcd, starting it on first use. It skips under
// -short, and fails with a message naming `make tools` when the binaries or CRDs are missing. The package must call
// Main from TestMain.
func Kube(t testing.TB) *Env {
	t.Helper()
	skipShort(t)
	requireMain(t)
	shared.once.Do(func() { shared.env, shared.err = startKube() })
	if shared.err != nil {
		t.Fatalf("testenv: starting kube-apiserver and etcd: %v", shared.err)
	}
	return shared.env
}

// startKube starts a kube-apiserver + etcd with the CRDs of bin/crds; configure, when given, adjusts the
// environment (apiserver flags) before it starts.
func startKube(configure ...func(*envtest.Environment)) (*Env, error) {
	assets, crds, err := kubeAssets()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{crds},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	quickShutdown(te)
	for _, c := range configure {
		c(te)
	}
	if _, err := harnessRoot(); err != nil { // the reaper must exist before the processes it guards
		return nil, err
	}
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	stopKube := register(func() {
		if err := te.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping kube-apiserver and etcd: %v\n", err)
		}
	})
	// envtest starts each binary in its own process group; the reaper kills them if this binary dies abruptly.
	for _, pid := range childProcesses("kube-apiserver", "etcd") {
		_ = reapLater("pg", strconv.Itoa(pid))
	}
	_ = reapLater("dir", te.ControlPlane.Etcd.DataDir)
	_ = reapLater("dir", te.ControlPlane.APIServer.CertDir)
	cfg.WarningHandler = rest.NoWarnings{} // e.g. "v2beta1 HelmRelease is deprecated": expected in these tests
	env := &Env{Config: cfg, te: te, stops: []func(){stopKube}}
	dir, _, err := tempDir("kube-")
	if err != nil {
		return nil, err
	}
	if err := env.initClients(dir); err != nil {
		return nil, err
	}
	return env, nil
}

// quickShutdown makes kube-apiserver stop within about 2 seconds of SIGTERM. By default it waits up to its request
// timeout (60s) for every connection to close, and the tests' informers keep watches open until the end: envtest then
// gives up after ControlPlaneStopTimeout (30s) and kills it, so every package paid 30 seconds per apiserver. With
// --shutdown-send-retry-after the apiserver drains the requests in flight (long-running ones, watches, excluded) and
// then gives connections 2 seconds. Only the shutdown changes.
func quickShutdown(te *envtest.Environment) {
	te.ControlPlane.GetAPIServer().Configure().Set("shutdown-send-retry-after", "true")
}

func (e *Env) initClients(dir string) error {
	var err error
	if e.Client, err = client.New(e.Config, client.Options{Scheme: Scheme()}); err != nil {
		return err
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return err
	}
	if e.Clientset, err = kubernetes.NewForConfig(e.Config); err != nil {
		return err
	}
	user, err := e.te.AddUser(envtest.User{Name: "testenv-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, kubeconfig, 0o600)
}

// UserKubeconfig adds a user authenticated by a client certificate (name, groups) to the apiserver and returns the
// path of a kubeconfig for it: what that user may do is up to the RBAC objects the test creates.
func (e *Env) UserKubeconfig(t testing.TB, name string, groups ...string) string {
	t.Helper()
	user, err := e.te.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("testenv: adding user %s: %v", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("testenv: kubeconfig of user %s: %v", name, err)
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return path
}

// kubeAssets finds the kube-apiserver/etcd directory ($KUBEBUILDER_ASSETS, else the module's bin/) and the CRD
// directory (bin/crds, generated by hack/tools.sh).
func kubeAssets() (assets, crds string, err error) {
	bin, err := BinDir()
	if err != nil {
		return "", "", err
	}
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = bin
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, name)); err != nil {
			return "", "", fmt.Errorf("%s not found in %s: run `make tools` first", name, assets)
		}
	}
	crds = filepath.Join(bin, "crds")
	if _, err := os.Stat(filepath.Join(crds, "helm.toolkit.fluxcd.io_helmreleases.yaml")); err != nil {
		return "", "", fmt.Errorf("CRDs not found in %s: run `make tools` first", crds)
	}
	return assets, crds, nil
}

// BinDir is where the tools live: $SYNCMEDIC_BIN, else bin/ at the root of the syncmedic module (found upwards
// from the working directory), as `make tools` fills it.
func BinDir() (string, error) {
	if d := os.Getenv("SYNCMEDIC_BIN"); d != "" {
		return d, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// moduleRoot is the root directory of the syncmedic module, found upwards from the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/syncmedic/syncmedic\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the syncmedic module root above the working directory; set SYNCMEDIC_BIN")
		}
		dir = parent
	}
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and returns its name. Namespaces are not deleted: without
// a namespace controller they would only turn Terminating, and the whole apiserver goes away after the binary.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t.Name())}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("testenv: creating namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// uniqueName turns prefix into a DNS label with a random suffix.
func uniqueName(prefix string) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(prefix), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[len(base)-40:], "-")
	}
	if base == "" {
		base = "t"
	}
	return base + "-" + randomHex(3)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
