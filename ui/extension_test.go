package ui

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExtensionIsServedForArgoCD(t *testing.T) {
	srv := newServer(t)
	t.Run("the bundle is served without a token", func(t *testing.T) {
		res, body := get(t, srv, http.MethodGet, ExtensionBundlePath, nil)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
		require.Equal(t, extensionBundle, body)
		require.Contains(t, string(body), "registerStatusPanelExtension")
	})
	t.Run("the archive holds the bundle where the extension installer copies it from", func(t *testing.T) {
		res, body := get(t, srv, http.MethodGet, ExtensionArchivePath, nil)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "application/x-tar", res.Header.Get("Content-Type"))
		files := map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(body))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				require.NoError(t, err)
				files[h.Name] = b
			}
		}
		require.Equal(t, map[string][]byte{"resources/extension-syncmedic.js/extension-syncmedic.js": extensionBundle}, files)
	})
	t.Run("the archive is the same bytes every time", func(t *testing.T) {
		a, err := extensionArchive()
		require.NoError(t, err)
		b, err := extensionArchive()
		require.NoError(t, err)
		require.Equal(t, a, b)
	})
}

// TestExtensionBundleIsBuiltFromItsSources keeps the committed bundle (what go:embed serves) in step with
// ui/extension/src: it runs the package's own build script into a temporary file and compares.
func TestExtensionBundleIsBuiltFromItsSources(t *testing.T) {
	esbuild := filepath.Join("extension", "node_modules", ".bin", "esbuild")
	if _, err := os.Stat(esbuild); err != nil {
		if testing.Short() {
			t.Skip("ui/extension/node_modules is missing: run make tools-ui")
		}
		t.Fatalf("ui/extension/node_modules is missing: run make tools-ui (%v)", err)
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	b, err := os.ReadFile(filepath.Join("extension", "package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &pkg))
	args := strings.Fields(pkg.Scripts["build"])
	require.Equal(t, "esbuild", args[0])
	out := filepath.Join(t.TempDir(), ExtensionFile)
	for i, a := range args {
		if strings.HasPrefix(a, "--outfile=") {
			args[i] = "--outfile=" + out
		}
	}
	cmd := exec.Command(filepath.Join("node_modules", ".bin", "esbuild"), args[1:]...)
	cmd.Dir = "extension"
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, string(msg))
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, string(fresh), string(extensionBundle), "ui/extension/dist is stale: run make tools-ui and commit it")
}
