package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/syncmedic/syncmedic/internal/imagebuild"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// installWait bounds each wait of these tests: Pods start in seconds, but the machine is shared.
const installWait = 3 * time.Minute

// poll calls check every 250 ms until it reports done; it fails the test with what and check's last error after
// installWait.
func poll(t *testing.T, what string, check func() (done bool, err error)) {
	t.Helper()
	deadline := time.Now().Add(installWait)
	var last error
	for {
		done, err := check()
		if done {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (last: %v)", what, installWait, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// repoRoot is the syncmedic module's root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// makefileImage is `make image`'s default IMAGE, the name the manifests and the chart use.
func makefileImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^IMAGE \?= (\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "no `IMAGE ?=` in the Makefile")
	return string(m[1])
}

// imported records the nodes importSyncmedicImage imported the image into (the tests of this package run one at a
// time).
var imported = map[*testenv.Node]bool{}

// importSyncmedicImage builds the syncmedic image as `make image` does, under the manifests' name, and imports it
// into the node's containerd: the manifests' Pods run it without a pull (IfNotPresent, a version tag).
func importSyncmedicImage(t *testing.T, n *testenv.Node) {
	t.Helper()
	if imported[n] {
		return
	}
	name := makefileImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l, err := imagebuild.Build(ctx, imagebuild.Options{Name: name, Version: name[strings.LastIndexByte(name, ':')+1:],
		ModuleRoot: repoRoot(t), Platforms: []string{"linux/amd64"}, WorkDir: t.TempDir()})
	require.NoError(t, err)
	archive, err := l.Tar()
	require.NoError(t, err)
	n.ImportImage(t, "syncmedic-image.tar", archive)
	imported[n] = true
}

// readmeBlock returns the nth (from 1) ```sh block after the line heading of the README's install pages
// (docs/install-kustomize.md, docs/install-helm.md, the pages the README sends users to install with).
func readmeBlock(t *testing.T, heading string, nth int) string {
	t.Helper()
	var docs strings.Builder
	for _, page := range []string{"install-kustomize.md", "install-helm.md"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", page))
		require.NoError(t, err)
		docs.Write(b)
	}
	_, after, ok := strings.Cut(docs.String(), "\n"+heading+"\n")
	require.True(t, ok, "no heading %q in docs/install-kustomize.md or docs/install-helm.md", heading)
	var block string
	for i := 0; i < nth; i++ {
		_, after, ok = strings.Cut(after, "```sh\n")
		require.True(t, ok, "no sh block %d after %q", i+1, heading)
		block, after, ok = strings.Cut(after, "```\n")
		require.True(t, ok, "unterminated sh block after %q", heading)
	}
	return block
}

// runShell runs script with bash (-euo pipefail) in dir, with bin/kubectl first on PATH and the node's admin
// kubeconfig, as a user at a shell would, and env (KEY=value, winning over the rest); it fails the test with the
// output when a command fails.
func runShell(t *testing.T, n *testenv.Node, dir, script string, env ...string) string {
	t.Helper()
	out, err := shell(t, n, dir, script, env...)
	require.NoError(t, err, "script:\n%s\noutput:\n%s", script, out)
	return out
}

// shell is runShell returning the error instead of failing the test.
func shell(t *testing.T, n *testenv.Node, dir, script string, env ...string) (string, error) {
	t.Helper()
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(bin, "kubectl"))
	require.NoError(t, err, "bin/kubectl: run `make tools`")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+n.Kubeconfig), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readyTrue reports whether a Flux object's Ready condition is True for its current generation.
func readyTrue(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			return g == o.GetGeneration()
		}
	}
	return false
}

// fluxObject is an unstructured Flux object.
func fluxObject(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
}

// describe names o and its conditions, for failure messages.
func describe(o *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	return fmt.Sprintf("%s %s/%s %v", o.GetKind(), o.GetNamespace(), o.GetName(), conds)
}

// chartRelease creates a HelmRepository charts at url and a HelmRelease name of chart at version in ns, and waits
// until the release is Ready.
func chartRelease(t *testing.T, n *testenv.Node, ns, url, name, chart, version string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []*unstructured.Unstructured{
		fluxObject("source.toolkit.fluxcd.io/v1", "HelmRepository", ns, "charts", map[string]any{"url": url, "interval": "1m"}),
		fluxObject("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, name, map[string]any{"interval": "1m",
			"chart": map[string]any{"spec": map[string]any{"chart": chart, "version": version,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"}}}}),
	} {
		err := n.Client.Create(ctx, o)
		if o.GetKind() == "HelmRepository" && apierrors.IsAlreadyExists(err) {
			continue // another test of the node made it
		}
		require.NoError(t, err, "%s", o.GetKind())
	}
	release := fluxObject("helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, name, nil)
	poll(t, "HelmRelease "+ns+"/"+name+" Ready", func() (bool, error) {
		if err := n.Client.Get(ctx, client.ObjectKeyFromObject(release), release); err != nil {
			return false, err
		}
		return readyTrue(release), fmt.Errorf("%s", describe(release))
	})
}
