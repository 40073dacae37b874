// Command release builds a syncmedic release into one directory (internal/release); `make release` runs it:
//
//	go run ./hack/release -version v0.1.0 -out dist
//
// The binaries are stamped with the version, the Git commit and the build date: SOURCE_DATE_EPOCH (seconds) when set,
// else the commit's time, so that the same commit gives the same artifacts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/release"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	o := release.Options{ModuleRoot: root}
	var targets, platforms string
	flag.StringVar(&o.Version, "version", "", "the release, v<major>.<minor>.<patch> (required)")
	flag.StringVar(&o.Commit, "commit", "", "Git commit stamped into the binaries (default: git rev-parse HEAD)")
	flag.StringVar(&o.Out, "out", "dist", "output directory (emptied first)")
	flag.StringVar(&targets, "targets", strings.Join(release.DefaultTargets(), ","), "comma-separated os/arch of the binaries")
	flag.StringVar(&platforms, "image-platforms", strings.Join(release.DefaultImagePlatforms(), ","), "comma-separated linux/<arch> of the image index")
	flag.StringVar(&o.Helm, "helm", filepath.Join(root, "bin", "helm"), "the helm CLI (make tools-helm)")
	flag.StringVar(&o.SBOMTool, "sbom-tool", filepath.Join(root, "bin", "cyclonedx-gomod"), "cyclonedx-gomod (make tools-sbom)")
	flag.Parse()
	o.Targets, o.ImagePlatforms = strings.Split(targets, ","), strings.Split(platforms, ",")
	if o.Commit == "" {
		if o.Commit, err = git(root, "rev-parse", "HEAD"); err != nil {
			return err
		}
	}
	if o.Date, err = buildDate(root, o.Commit); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	digest, err := release.Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s: %s (image %s:%s@%s)\n", "syncmedic", o.Version, o.Out, release.ImageRepository, o.Version, digest)
	return nil
}

// buildDate is SOURCE_DATE_EPOCH when set, else the commit's committer time.
func buildDate(root, commit string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git(root, "log", "-1", "--format=%ct", commit); err != nil {
			return time.Time{}, err
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s (set -commit and SOURCE_DATE_EPOCH outside a Git checkout): %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
