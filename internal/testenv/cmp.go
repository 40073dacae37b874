package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/argoproj/argo-cd/v2/cmpserver"
	cmpapiclient "github.com/argoproj/argo-cd/v2/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v2/cmpserver/plugin"
	"github.com/argoproj/argo-cd/v2/common"
	"github.com/argoproj/argo-cd/v2/util/cmp"
)

// CMP is a real Argo CD config management plugin server (github.com/argoproj/argo-cd/v2/cmpserver) running
// in-process on a unix socket with a given plugin.yaml, the way the plugin sidecar runs it.
type CMP struct {
	// Socket is the unix socket the plugin server listens on.
	Socket string
}

// cmpWorkDir is the process-wide ARGOCD_CMP_WORKDIR: cmp-server reads it from the environment on every request and
// removes <workdir>/_cmp_server when a server is created, so it is set once and creation is serialised.
var cmpWorkDir struct {
	sync.Mutex
	dir string
}

// CMPServer starts the cmp-server with pluginYAML as its plugin.yaml (a ConfigManagementPlugin) and stops it when
// the test ends. It skips under -short.
func CMPServer(t testing.TB, pluginYAML string) *CMP {
	t.Helper()
	skipShort(t)
	requireMain(t)
	c, stop, err := startCMP(pluginYAML)
	if err != nil {
		t.Fatalf("testenv: starting cmp-server: %v", err)
	}
	t.Cleanup(stop)
	return c
}

func startCMP(pluginYAML string) (*CMP, func(), error) {
	dir, removeDir, err := tempDir("cmp-")
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, common.PluginConfigFileName), []byte(pluginYAML), 0o600); err != nil {
		removeDir()
		return nil, nil, err
	}
	config, err := plugin.ReadPluginConfig(dir)
	if err != nil {
		removeDir()
		return nil, nil, fmt.Errorf("reading plugin.yaml: %w", err)
	}
	srv, err := createCMPServer(config)
	if err != nil {
		removeDir()
		return nil, nil, err
	}
	socket := filepath.Join(dir, "plugin.sock")
	listener, err := net.Listen("unix", socket)
	if err != nil {
		removeDir()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(listener)
	}()
	stop := register(func() {
		srv.Stop()
		<-done
		removeDir()
	})
	return &CMP{Socket: socket}, stop, nil
}

// createCMPServer builds the gRPC server with cmpserver.NewServer(...).CreateGRPC() (never Run, which exits the
// process on errors and installs signal handlers).
func createCMPServer(config *plugin.PluginConfig) (interface {
	Serve(net.Listener) error
	Stop()
}, error) {
	cmpWorkDir.Lock()
	defer cmpWorkDir.Unlock()
	if cmpWorkDir.dir == "" {
		dir, _, err := tempDir("cmpwork-")
		if err != nil {
			return nil, err
		}
		cmpWorkDir.dir = dir
		if err := os.Setenv(common.EnvCMPWorkDir, dir); err != nil {
			return nil, err
		}
	}
	s, err := cmpserver.NewServer(plugin.CMPServerInitConstants{PluginConfig: *config})
	if err != nil {
		return nil, err
	}
	return s.CreateGRPC()
}

// Generate sends appDir to the plugin the way the repo-server does (util/cmp.SendRepoStream: a tar.gz of the
// directory plus metadata carrying env as the command's environment, e.g. ARGOCD_APP_NAME, ARGOCD_ENV_*, PARAM_*)
// and returns the manifests the generate command printed, split into documents. A failing command's error is
// returned, with the message Argo CD would show on the Application.
func (c *CMP) Generate(t testing.TB, appDir string, env map[string]string) ([]string, error) {
	t.Helper()
	return c.GenerateFromRepo(t, appDir, appDir, env)
}

// GenerateFromRepo is Generate for an application at appPath inside a repository checked out at repoRoot: the whole
// repository is sent, as the repo-server does.
func (c *CMP) GenerateFromRepo(t testing.TB, repoRoot, appPath string, env map[string]string) ([]string, error) {
	t.Helper()
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if appPath, err = filepath.Abs(appPath); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	closer, client, err := cmpapiclient.NewConfigManagementPluginClientSet(c.Socket).NewConfigManagementPluginClient()
	if err != nil {
		t.Fatalf("testenv: connecting to cmp-server: %v", err)
	}
	defer closeQuietly(closer)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := client.GenerateManifest(ctx)
	if err != nil {
		return nil, err
	}
	if err := cmp.SendRepoStream(ctx, appPath, repoRoot, stream, envList(env), nil); err != nil {
		return nil, err
	}
	res, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return res.Manifests, nil
}

func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	return list
}
