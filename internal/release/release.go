package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/imagebuild"
)

// DefaultTargets are the platforms a release ships binaries for.
func DefaultTargets() []string {
	return []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}
}

// DefaultImagePlatforms are the platforms of the release's image index.
func DefaultImagePlatforms() []string { return []string{"linux/amd64", "linux/arm64"} }

// ImageRepository is the repository the manifests and the chart name (manifests/base, charts/syncmedic/values.yaml).
const ImageRepository = "ghcr.io/syncmedic/syncmedic"

// The release's fixed file names in Options.Out.
const (
	ChecksumsFile  = "checksums.txt"
	ProvenanceFile = "provenance.txt"
)

// Options say what to release. Version, ModuleRoot, Out, Helm and SBOMTool are required.
type Options struct {
	// Version is the release, a SemVer with a leading v (v0.1.0): the binaries' and the image's version, the image
	// tag, the chart's appVersion; the chart's version is the same without the v.
	Version string
	// Commit is the Git commit stamped into the binaries and the image's revision label (optional).
	Commit string
	// Date is the build date stamped into the binaries and dating the image (the commit's time, or
	// SOURCE_DATE_EPOCH, for a reproducible build).
	Date time.Time
	// ModuleRoot is the syncmedic module's directory; Out receives the artifacts (emptied first).
	ModuleRoot, Out string
	// Targets are the binaries' platforms (default DefaultTargets); ImagePlatforms the image's, each of which must be a
	// target (default DefaultImagePlatforms).
	Targets, ImagePlatforms []string
	// Helm is the helm CLI (bin/helm); SBOMTool is cyclonedx-gomod (bin/cyclonedx-gomod, hack/sbom-tools.sh).
	Helm, SBOMTool string
	// CACertsFile is the CA bundle the image carries (default imagebuild's).
	CACertsFile string
	// GoBuild builds the binary of one target into out (default imagebuild.GoBuild of ModuleRoot, the image's flags).
	GoBuild func(ctx context.Context, goos, goarch string, s imagebuild.Stamp, out string) error
}

// semver is a release version: v, then MAJOR.MINOR.PATCH, then an optional pre-release.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func (o *Options) validate() error {
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("release: version %q is not a release version: want v<major>.<minor>.<patch>, e.g. make release VERSION=v0.1.0", o.Version)
	}
	if o.ModuleRoot == "" || o.Out == "" || o.Helm == "" || o.SBOMTool == "" {
		return errors.New("release: ModuleRoot, Out, Helm and SBOMTool are required")
	}
	for _, tool := range []struct{ path, build string }{{o.Helm, "make tools-helm"}, {o.SBOMTool, "make tools-sbom"}} {
		if _, err := exec.LookPath(tool.path); err != nil {
			return fmt.Errorf("release: %w: build it with %s", err, tool.build)
		}
	}
	if len(o.Targets) == 0 {
		o.Targets = DefaultTargets()
	}
	if len(o.ImagePlatforms) == 0 {
		o.ImagePlatforms = DefaultImagePlatforms()
	}
	for _, p := range o.ImagePlatforms {
		if !slices.Contains(o.Targets, p) {
			return fmt.Errorf("release: image platform %s is not among the targets %v: add it to the targets", p, o.Targets)
		}
	}
	for _, t := range o.Targets {
		goos, goarch, ok := strings.Cut(t, "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("release: target %q: want os/arch, e.g. linux/amd64", t)
		}
	}
	if o.GoBuild == nil {
		o.GoBuild = func(ctx context.Context, goos, goarch string, s imagebuild.Stamp, out string) error {
			return imagebuild.GoBuild(ctx, o.ModuleRoot, goos, goarch, s, out)
		}
	}
	if o.Date.IsZero() {
		return errors.New("release: Date is required: the commit's time or SOURCE_DATE_EPOCH")
	}
	return nil
}

// BinaryName is the file name of the binary for platform (os/arch): syncmedic_v0.1.0_linux_amd64.
func BinaryName(version, platform string) string {
	return "syncmedic_" + version + "_" + strings.ReplaceAll(platform, "/", "_")
}

// ImageLayoutDir and ImageArchive are the names of the image's OCI layout directory and its archive.
func ImageLayoutDir(version string) string { return "syncmedic_" + version + "_oci" }

// ImageArchive is the name of the image's archive (the layout as one tar, with docker's manifest.json).
func ImageArchive(version string) string { return "syncmedic_" + version + "_image.tar" }

// SBOMName is the name of the CycloneDX SBOM of the binary for platform.
func SBOMName(version, platform string) string { return BinaryName(version, platform) + ".cdx.json" }

// ChartVersion is the chart's version for a release: the version without its v.
func ChartVersion(version string) string { return strings.TrimPrefix(version, "v") }

// ChartArchive is the name of the packaged chart (helm package's name-version.tgz).
func ChartArchive(version string) string { return "syncmedic-" + ChartVersion(version) + ".tgz" }

// Build writes the release into o.Out and returns the image's digest.
func Build(ctx context.Context, o Options) (digest string, err error) {
	if err := o.validate(); err != nil {
		return "", err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	stamp := imagebuild.Stamp{Version: o.Version, Commit: o.Commit, BuildDate: o.Date.UTC().Format(time.RFC3339)}
	binaries := map[string]string{}
	for _, t := range o.Targets {
		goos, goarch, _ := strings.Cut(t, "/")
		out := filepath.Join(o.Out, BinaryName(o.Version, t))
		if err := o.GoBuild(ctx, goos, goarch, stamp, out); err != nil {
			return "", err
		}
		binaries[t] = out
	}
	if digest, err = buildImage(ctx, o, binaries); err != nil {
		return "", err
	}
	if err := packageChart(ctx, o); err != nil {
		return "", err
	}
	if err := renderInstalls(o); err != nil {
		return "", err
	}
	if err := writeSBOMs(ctx, o); err != nil {
		return "", err
	}
	if err := writeProvenance(ctx, o); err != nil {
		return "", err
	}
	return digest, writeChecksums(o.Out)
}

// buildImage assembles the image index from the release's linux binaries, as the layout and its archive.
func buildImage(ctx context.Context, o Options, binaries map[string]string) (string, error) {
	l, err := imagebuild.Build(ctx, imagebuild.Options{Name: ImageRepository + ":" + o.Version, Version: o.Version,
		Revision: o.Commit, ModuleRoot: o.ModuleRoot, Platforms: o.ImagePlatforms, CACertsFile: o.CACertsFile,
		Epoch: o.Date, Binaries: binaries})
	if err != nil {
		return "", err
	}
	if err := l.WriteDir(filepath.Join(o.Out, ImageLayoutDir(o.Version))); err != nil {
		return "", err
	}
	archive, err := l.Tar()
	if err != nil {
		return "", err
	}
	return l.Digest, os.WriteFile(filepath.Join(o.Out, ImageArchive(o.Version)), archive, 0o644)
}

// packageChart packages charts/syncmedic with the release's version and appVersion: the image tag defaults to the
// appVersion (values.yaml's image.tag is empty).
func packageChart(ctx context.Context, o Options) error {
	cmd := exec.CommandContext(ctx, o.Helm, "package", filepath.Join(o.ModuleRoot, "charts", "syncmedic"),
		"--version", ChartVersion(o.Version), "--app-version", o.Version, "--destination", o.Out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("release: helm package: %w\n%s", err, b)
	}
	return nil
}

// writeSBOMs writes a CycloneDX SBOM per binary from the module information the Go toolchain put in it
// (cyclonedx-gomod bin): the modules linked into that binary, with their versions and sums.
func writeSBOMs(ctx context.Context, o Options) error {
	for _, t := range o.Targets {
		cmd := exec.CommandContext(ctx, o.SBOMTool, "bin", "-json", "-noserial", "-notimestamp", "-version", o.Version,
			"-output", SBOMName(o.Version, t), BinaryName(o.Version, t))
		cmd.Dir = o.Out
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("release: SBOM of %s (%s): %w\n%s", t, o.SBOMTool, err, b)
		}
	}
	return nil
}

// writeProvenance writes `go version -m` of every binary: the Go version, the modules with their sums and the build
// settings each was built with.
func writeProvenance(ctx context.Context, o Options) error {
	var b strings.Builder
	for _, t := range o.Targets {
		cmd := exec.CommandContext(ctx, "go", "version", "-m", BinaryName(o.Version, t))
		cmd.Dir = o.Out
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("release: go version -m %s: %w", BinaryName(o.Version, t), err)
		}
		b.Write(out)
	}
	return os.WriteFile(filepath.Join(o.Out, ProvenanceFile), []byte(b.String()), 0o644)
}

// writeChecksums writes checksums.txt: the SHA-256 of every file directly in dir (the layout directory's blobs are
// named by their digests), as `sha256sum` writes them, so `sha256sum -c checksums.txt` checks them.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != ChecksumsFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(b.String()), 0o644)
}
