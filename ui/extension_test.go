package ui

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
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
