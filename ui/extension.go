package ui

import (
	"archive/tar"
	"bytes"
	_ "embed"
	"net/http"
	"time"
)

// The Argo CD UI extension bundle (built from ui/extension by hack/ui-tools.sh) as serve hands it out.
const (
	// ExtensionBundlePath is the bundle itself.
	ExtensionBundlePath = PagePath + ExtensionFile
	// ExtensionArchivePath is the bundle in the tar layout Argo CD's extension installer
	// (quay.io/argoprojlabs/argocd-extension-installer) copies into argocd-server's /tmp/extensions/.
	ExtensionArchivePath = PagePath + "extension.tar"
	// ExtensionFile is the bundle's name: argocd-server loads every file named extension*.js under /tmp/extensions/.
	ExtensionFile = "extension-syncmedic.js"
)

//go:embed extension/dist/extension-syncmedic.js
var extensionBundle []byte

// extensionArchive builds the installer's archive: resources/extension-syncmedic.js/extension-syncmedic.js.
func extensionArchive() ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	// A fixed time keeps the archive byte for byte the same for the same bundle.
	mod := time.Unix(0, 0)
	for _, d := range []string{"resources/", "resources/" + ExtensionFile + "/"} {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mod}); err != nil {
			return nil, err
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "resources/" + ExtensionFile + "/" + ExtensionFile, Mode: 0o644,
		Size: int64(len(extensionBundle)), ModTime: mod}
	if err := w.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := w.Write(extensionBundle); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func serveBytes(contentType string, b []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	})
}
