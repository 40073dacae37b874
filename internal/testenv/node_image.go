package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/ociimage"
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

// imageFile is one entry of an image's single layer (internal/ociimage, shared with the syncmedic image builder).
type imageFile = ociimage.File

// ociImage is an OCI image layout as a tar archive (for `ctr images import`) and its manifest digest.
type ociImage struct {
	Tar    []byte
	Digest string
}

// buildOCIImage assembles an OCI image layout of one uncompressed linux/amd64 layer holding files, named name,
// running entrypoint. The layout is a pure function of its inputs: entries are sorted, times are zero and owners
// root, so the same input gives the same digest.
func buildOCIImage(name string, files []imageFile, entrypoint []string) (ociImage, error) {
	return buildOCIImageWith(name, files, ociimage.Config{Env: []string{"PATH=/bin"}, Entrypoint: entrypoint,
		CreatedBy: "syncmedic internal/testenv buildOCIImage"})
}

// buildOCIImageWith is buildOCIImage with the image's configuration cfg (linux/amd64; working directory / unless
// cfg names one).
func buildOCIImageWith(name string, files []imageFile, cfg ociimage.Config) (ociImage, error) {
	cfg.OS, cfg.Architecture = "linux", "amd64"
	if cfg.WorkingDir == "" {
		cfg.WorkingDir = "/"
	}
	l, err := ociimage.Build(name, time.Unix(0, 0), ociimage.Image{Files: files, Config: cfg})
	if err != nil {
		return ociImage{}, err
	}
	out, err := l.Tar()
	if err != nil {
		return ociImage{}, err
	}
	return ociImage{Tar: out, Digest: l.Digest}, nil
}

// rootDirs are the directories every image of the node has (mount points runc and the kubelet expect).
var rootDirs = []string{"bin", "dev", "etc", "proc", "sys", "tmp", "var"}

// busyboxImage builds NodeBusyboxImage from the static busybox at busyboxPath (Debian's busybox-static), with a
// link in /bin for every applet it lists.
func busyboxImage(ctx context.Context, busyboxPath string) (ociImage, error) {
	files, err := busyboxFiles(ctx, busyboxPath)
	if err != nil {
		return ociImage{}, err
	}
	for _, d := range rootDirs {
		files = append(files, imageFile{Path: d, Dir: true})
	}
	return buildOCIImage(NodeBusyboxImage, files, []string{"/bin/sh"})
}

// busyboxFiles are the static busybox at busyboxPath as /bin/busybox and a link in /bin for every applet it lists.
func busyboxFiles(ctx context.Context, busyboxPath string) ([]imageFile, error) {
	data, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s (Debian package busybox-static, installed by `make tools`): %w", busyboxPath, err)
	}
	list, err := exec.CommandContext(ctx, busyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busyboxPath, err)
	}
	files := []imageFile{{Path: "bin/busybox", Data: data, Mode: 0o755}}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" && path.Base(applet) == applet {
			files = append(files, imageFile{Path: "bin/" + applet, Link: "busybox"})
		}
	}
	return files, nil
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
