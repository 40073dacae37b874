package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The images the real node runs, built locally (never pulled): NodePauseImage is containerd's sandbox image (a
// static Go program, internal/testenv/nodepause), NodeBusyboxImage holds Debian's busybox-static with a link per
// applet (sh, echo, sleep, true, wget, ...). Pods use them with imagePullPolicy Never.
const (
	NodePauseImage   = "docker.io/local/pause:1"
	NodeBusyboxImage = "docker.io/local/busybox:1"
	// NodeWebhookImage is internal/testenv/nodewebhook, a validating admission webhook backend serving HTTPS on
	// port 8443 with the key pair of a Secret mounted at /tls; imported when a test asks (Node.WebhookImage).
	NodeWebhookImage = "docker.io/local/admission-webhook:1"
)

// imageFile is one entry of an image's single layer: a regular file (Data, Mode), a directory (Dir) or a symbolic
// link (Link).
type imageFile struct {
	Path string
	Data []byte
	Mode int64
	Dir  bool
	Link string
}

// ociImage is an OCI image layout as a tar archive (for `ctr images import`) and its manifest digest.
type ociImage struct {
	Tar    []byte
	Digest string
}

// buildOCIImage assembles an OCI image layout of one uncompressed layer holding files, named name, running
// entrypoint. The layout is a pure function of its inputs: entries are sorted, times are zero and owners root, so the
// same input gives the same digest.
func buildOCIImage(name string, files []imageFile, entrypoint []string) (ociImage, error) {
	layer, err := layerTar(files)
	if err != nil {
		return ociImage{}, err
	}
	layerDigest := sha256Digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/bin"},
			"Entrypoint": entrypoint,
			"WorkingDir": "/",
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		"history": []map[string]string{{"created_by": "syncmedic internal/testenv buildOCIImage"}},
	})
	if err != nil {
		return ociImage{}, err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config, nil),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer, nil)},
	})
	if err != nil {
		return ociImage{}, err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{descriptor("application/vnd.oci.image.manifest.v1+json", manifest, map[string]string{
			"io.containerd.image.name":          name,
			"org.opencontainers.image.ref.name": name[strings.LastIndexByte(name, ':')+1:],
		})},
	})
	if err != nil {
		return ociImage{}, err
	}
	var entries []imageFile
	entries = append(entries, imageFile{Path: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`), Mode: 0o644},
		imageFile{Path: "index.json", Data: index, Mode: 0o644}, imageFile{Path: "blobs", Dir: true},
		imageFile{Path: "blobs/sha256", Dir: true})
	for _, blob := range [][]byte{layer, config, manifest} {
		entries = append(entries, imageFile{Path: "blobs/sha256/" + strings.TrimPrefix(sha256Digest(blob), "sha256:"), Data: blob, Mode: 0o644})
	}
	out, err := layerTar(entries)
	if err != nil {
		return ociImage{}, err
	}
	return ociImage{Tar: out, Digest: sha256Digest(manifest)}, nil
}

func descriptor(mediaType string, blob []byte, annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": sha256Digest(blob), "size": len(blob)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layerTar writes files as a tar archive, sorted by path, owned by root, dated at the epoch.
func layerTar(files []imageFile) ([]byte, error) {
	sorted := append([]imageFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		h := &tar.Header{Name: f.Path, ModTime: time.Unix(0, 0), Format: tar.FormatPAX, Mode: f.Mode}
		switch {
		case f.Dir:
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, f.Path+"/", 0o755
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// rootDirs are the directories every image of the node has (mount points runc and the kubelet expect).
var rootDirs = []string{"bin", "dev", "etc", "proc", "sys", "tmp", "var"}

// busyboxImage builds NodeBusyboxImage from the static busybox at busyboxPath (Debian's busybox-static), with a
// link in /bin for every applet it lists.
func busyboxImage(ctx context.Context, busyboxPath string) (ociImage, error) {
	data, err := os.ReadFile(busyboxPath)
	if err != nil {
		return ociImage{}, fmt.Errorf("reading %s (Debian package busybox-static, installed by `make tools`): %w", busyboxPath, err)
	}
	list, err := exec.CommandContext(ctx, busyboxPath, "--list").Output()
	if err != nil {
		return ociImage{}, fmt.Errorf("%s --list: %w", busyboxPath, err)
	}
	files := []imageFile{{Path: "bin/busybox", Data: data, Mode: 0o755}}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" && path.Base(applet) == applet {
			files = append(files, imageFile{Path: "bin/" + applet, Link: "busybox"})
		}
	}
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true})
	}
	return buildOCIImage(NodeBusyboxImage, files, []string{"/bin/sh"})
}

// pauseImage builds NodePauseImage from internal/testenv/nodepause, compiled statically and reproducibly with the
// go command of this test run into dir.
func pauseImage(ctx context.Context, moduleRoot, dir string) (ociImage, error) {
	return goProgramImage(ctx, moduleRoot, dir, "nodepause", "pause", NodePauseImage)
}

// webhookImage builds NodeWebhookImage from internal/testenv/nodewebhook, as pauseImage builds the pause image.
func webhookImage(ctx context.Context, moduleRoot, dir string) (ociImage, error) {
	return goProgramImage(ctx, moduleRoot, dir, "nodewebhook", "webhook", NodeWebhookImage)
}

// goProgramImage builds the image name holding only /<file>, the static build of internal/testenv/<program>.
func goProgramImage(ctx context.Context, moduleRoot, dir, program, file, name string) (ociImage, error) {
	out := filepath.Join(dir, file)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out,
		"./internal/testenv/"+program)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return ociImage{}, fmt.Errorf("building %s: %w\n%s", program, err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return ociImage{}, err
	}
	files := []imageFile{{Path: file, Data: data, Mode: 0o755}}
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true})
	}
	return buildOCIImage(name, files, []string{"/" + file})
}
