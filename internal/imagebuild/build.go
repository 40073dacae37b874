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
	// versionVar, commitVar and buildDateVar are the variables -ldflags -X stamps (as the Dockerfile does for the
	// version; `make release` stamps all three).
	versionVar   = "github.com/syncmedic/syncmedic.Version"
	commitVar    = "github.com/syncmedic/syncmedic.Commit"
	buildDateVar = "github.com/syncmedic/syncmedic.BuildDate"
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
	// Binaries, when set, are the binaries to put in the image, by platform ("linux/amd64": path), built by GoBuild
	// (`make release` builds them once for its archives and its image); Build then compiles nothing.
	Binaries map[string]string
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
	bin, err := binary(ctx, o, platform)
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

// binary returns the binary for platform: the one Options.Binaries names, or a new build of the version.
func binary(ctx context.Context, o Options, platform string) ([]byte, error) {
	if o.Binaries != nil {
		p, ok := o.Binaries[platform]
		if !ok {
			return nil, fmt.Errorf("imagebuild: no binary for %s among the prebuilt ones", platform)
		}
		return os.ReadFile(p)
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	out := filepath.Join(o.WorkDir, goos+"-"+goarch, "syncmedic")
	if err := GoBuild(ctx, o.ModuleRoot, goos, goarch, Stamp{Version: o.Version}, out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// Stamp is what the linker stamps into the binary: `syncmedic version` prints it. Commit and BuildDate are optional.
type Stamp struct {
	Version, Commit, BuildDate string
}

// GoBuild compiles moduleRoot's ./cmd/syncmedic for goos/goarch into out as the Dockerfile does: static, path-independent,
// no build ID or VCS stamp, s stamped. The image and `make release` build with exactly these flags, so a release
// reuses the compile cache of the image's build.
func GoBuild(ctx context.Context, moduleRoot, goos, goarch string, s Stamp, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", LDFlags(s), "-o", out, "./cmd/syncmedic")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("imagebuild: building syncmedic for %s/%s: %w\n%s", goos, goarch, err, b)
	}
	return nil
}

// LDFlags are the linker flags of the binary: no symbol table, no build ID, s stamped (commit and date when set).
func LDFlags(s Stamp) string {
	f := "-s -w -buildid= -X " + versionVar + "=" + s.Version
	if s.Commit != "" {
		f += " -X " + commitVar + "=" + s.Commit
	}
	if s.BuildDate != "" {
		f += " -X " + buildDateVar + "=" + s.BuildDate
	}
	return f
}

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
