package imagebuild

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/ociimage"
)

// The image's files, relative to its root: the binary, Debian's CA bundle and the user database, in that order.
const (
	BinaryPath  = "usr/local/bin/syncmedic"
	CACertsPath = "etc/ssl/certs/ca-certificates.crt"
	PasswdPath  = "etc/passwd"
	GroupPath   = "etc/group"
)

// The image's configuration.
const (
	// User is the non-root user (and group) the container runs as: distroless's "nonroot", the chart's runAsUser.
	User = "65532:65532"
	// SourceURL is the org.opencontainers.image.source label.
	SourceURL = "https://github.com/syncmedic/syncmedic"
	// DefaultCACertsFile is where Debian's ca-certificates package writes the bundle Go's crypto/x509 reads.
	DefaultCACertsFile = "/etc/ssl/certs/ca-certificates.crt"
	// versionVar is the variable -ldflags -X stamps with the version (as the Makefile and the Dockerfile do).
	versionVar = "github.com/syncmedic/syncmedic.Version"
)

// Files lists the image's regular files, the only entries of its layer besides their parent directories.
func Files() []string { return []string{BinaryPath, CACertsPath, PasswdPath, GroupPath} }

// rootfs holds the files the image takes from the repository as they are (the Dockerfile copies the same directory).
//
//go:embed rootfs
var rootfs embed.FS

// Options say what to build. Name, Version and ModuleRoot are required.
type Options struct {
	// Name is the image reference (registry/repository:tag) the layout's index names.
	Name string
	// Version is stamped into the binary (`syncmedic version`) and the org.opencontainers.image.version label;
	// Revision (a Git commit, optional) is the org.opencontainers.image.revision label.
	Version, Revision string
	// ModuleRoot is the syncmedic module's directory, whose ./cmd/syncmedic is built.
	ModuleRoot string
	// Platforms are os/arch pairs (linux only; default DefaultPlatforms).
	Platforms []string
	// CACertsFile is the CA bundle to copy (default DefaultCACertsFile).
	CACertsFile string
	// WorkDir receives the binaries (default: a temporary directory, removed afterwards).
	WorkDir string
	// Epoch dates every layer entry and the image (SOURCE_DATE_EPOCH; default the Unix epoch).
	Epoch time.Time
}

// DefaultPlatforms is linux/amd64, and the host's architecture when it is another.
func DefaultPlatforms() []string {
	p := []string{"linux/amd64"}
	if runtime.GOARCH != "amd64" {
		p = append(p, "linux/"+runtime.GOARCH)
	}
	return p
}

// Build compiles the binary for each platform and assembles the image's layout. Errors are configuration or
// build errors: retrying does not help.
func Build(ctx context.Context, o Options) (*ociimage.Layout, error) {
	if o.Name == "" || o.Version == "" || o.ModuleRoot == "" {
		return nil, errors.New("imagebuild: Name, Version and ModuleRoot are required")
	}
	if !strings.Contains(path.Base(o.Name), ":") {
		return nil, fmt.Errorf("imagebuild: image %q has no tag", o.Name)
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms()
	}
	if o.CACertsFile == "" {
		o.CACertsFile = DefaultCACertsFile
	}
	if o.Epoch.IsZero() {
		o.Epoch = time.Unix(0, 0)
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "syncmedic-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	common, err := commonFiles(o.CACertsFile)
	if err != nil {
		return nil, err
	}
	var images []ociimage.Image
	for _, p := range o.Platforms {
		img, err := platformImage(ctx, o, p, common)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	return ociimage.Build(o.Name, o.Epoch, images...)
}

// platformImage builds the binary for platform (os/arch) and returns that platform's image.
func platformImage(ctx context.Context, o Options, platform string, common []ociimage.File) (ociimage.Image, error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok || goos != "linux" || goarch == "" {
		return ociimage.Image{}, fmt.Errorf("imagebuild: platform %q: want linux/<arch>", platform)
	}
	bin, err := buildBinary(ctx, o, goarch)
	if err != nil {
		return ociimage.Image{}, err
	}
	files := append([]ociimage.File{{Path: BinaryPath, Data: bin, Mode: 0o755}}, common...)
	labels := map[string]string{"org.opencontainers.image.source": SourceURL, "org.opencontainers.image.version": o.Version}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	return ociimage.Image{Gzip: true, Files: ociimage.WithParents(files), Config: ociimage.Config{
		OS: goos, Architecture: goarch, User: User, Entrypoint: Entrypoint(),
		Env:    []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: labels, Created: o.Epoch,
		CreatedBy: "syncmedic internal/imagebuild (make image)",
	}}, nil
}

// buildBinary compiles ./cmd/syncmedic for linux/goarch as the Dockerfile does: static, path-independent, no build
// ID or VCS stamp, the version stamped.
func buildBinary(ctx context.Context, o Options, goarch string) ([]byte, error) {
	out := filepath.Join(o.WorkDir, "linux-"+goarch, "syncmedic")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", ldflags(o.Version), "-o", out, "./cmd/syncmedic")
	cmd.Dir = o.ModuleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("imagebuild: building syncmedic for linux/%s: %w\n%s", goarch, err, b)
	}
	return os.ReadFile(out)
}

// ldflags are the linker flags of the binary: no symbol table, no build ID, version stamped.
func ldflags(version string) string { return "-s -w -buildid= -X " + versionVar + "=" + version }

// Entrypoint is the image's entrypoint: the binary.
func Entrypoint() []string { return []string{"/" + BinaryPath} }

// commonFiles returns the files every platform's image holds besides the binary: the CA bundle and rootfs/.
func commonFiles(caCertsFile string) ([]ociimage.File, error) {
	certs, err := os.ReadFile(caCertsFile)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: reading the CA certificates (Debian package ca-certificates: "+
			"apt-get install ca-certificates): %w", err)
	}
	files := []ociimage.File{{Path: CACertsPath, Data: certs, Mode: 0o644}}
	for _, p := range []string{PasswdPath, GroupPath} {
		b, err := rootfs.ReadFile("rootfs/" + p)
		if err != nil {
			return nil, err
		}
		files = append(files, ociimage.File{Path: p, Data: b, Mode: 0o644})
	}
	return files, nil
}
