package testenv

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubePrivate starts a kube-apiserver + etcd for t alone, stopped when t ends, with only the CRDs in crdDirs
// installed (none of bin/crds). Tests that change something cluster-wide — replacing the HelmRelease CRD by an
// older controller's and upgrading it, the way a Flux upgrade does — use it so they cannot disturb the tests sharing
// Kube or KubeWithControllers. It has no kube-controller-manager. It skips under -short.
func KubePrivate(t testing.TB, crdDirs ...string) *Env {
	t.Helper()
	skipShort(t)
	requireMain(t)
	env, stop, err := startPrivateKube(crdDirs, nil)
	if err != nil {
		t.Fatalf("testenv: starting a private kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(stop)
	return env
}

// KubePrivateEndpointRouting is KubePrivate (no CRDs) with --enable-aggregator-routing: the apiserver calls a
// webhook's (and an APIService's) `service` through the Service's Endpoints, not its ClusterIP, which nothing
// routes here (no kube-proxy). A test can then serve an admission webhook itself, on an address of this host, behind
// a Service without selector and the Endpoints it writes.
func KubePrivateEndpointRouting(t testing.TB) *Env {
	t.Helper()
	skipShort(t)
	requireMain(t)
	env, stop, err := startPrivateKube(nil, map[string]string{"enable-aggregator-routing": "true"})
	if err != nil {
		t.Fatalf("testenv: starting a private kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(stop)
	return env
}

// KubePrivateAudited is KubePrivate (no CRDs) with the audit log on: every request at level Metadata, written to
// Env.AuditLog in t's temporary directory (AuditOffset, AuditCalls).
func KubePrivateAudited(t testing.TB) *Env {
	t.Helper()
	skipShort(t)
	requireMain(t)
	audit, err := auditFlags(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	env, stop, err := startPrivateKube(nil, audit)
	if err != nil {
		t.Fatalf("testenv: starting a private kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(stop)
	env.AuditLog = audit["audit-log-path"]
	return env
}

func startPrivateKube(crdDirs []string, apiserverArgs map[string]string) (*Env, func(), error) {
	assets, _, err := kubeAssets()
	if err != nil {
		return nil, nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	quickShutdown(te)
	for k, v := range apiserverArgs {
		te.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if _, err := harnessRoot(); err != nil {
		return nil, nil, err
	}
	before := map[int]bool{}
	for _, pid := range childProcesses("kube-apiserver", "etcd") {
		before[pid] = true
	}
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		return nil, nil, err
	}
	stop := register(func() {
		if err := te.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping a private kube-apiserver and etcd: %v\n", err)
		}
	})
	for _, pid := range childProcesses("kube-apiserver", "etcd") {
		if !before[pid] {
			_ = reapLater("pg", strconv.Itoa(pid))
		}
	}
	_ = reapLater("dir", te.ControlPlane.Etcd.DataDir)
	_ = reapLater("dir", te.ControlPlane.APIServer.CertDir)
	cfg.WarningHandler = rest.NoWarnings{}
	env := &Env{Config: cfg, te: te}
	dir, _, err := tempDir("kube-private-")
	if err != nil {
		stop()
		return nil, nil, err
	}
	if err := env.initClients(dir); err != nil {
		stop()
		return nil, nil, err
	}
	return env, stop, nil
}
