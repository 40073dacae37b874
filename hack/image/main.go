// Command image builds the syncmedic container image without a container engine (internal/imagebuild) and writes
// it as an OCI image layout directory and as one archive (`ctr images import`, `kind load image-archive`,
// `docker load`, `crane push`); it prints the image's digest. `make image` runs it:
//
//	go run ./hack/image -name ghcr.io/syncmedic/syncmedic:v0.1.0 -version v0.1.0 -out dist
//
// SOURCE_DATE_EPOCH (seconds) dates the image's files; the same source, version, revision and epoch give the same
// digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/syncmedic/syncmedic/internal/imagebuild"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var o imagebuild.Options
	var platforms, out string
	flag.StringVar(&o.Name, "name", "ghcr.io/syncmedic/syncmedic:v0.1.0", "image reference, with a tag")
	flag.StringVar(&o.Version, "version", "", "version stamped into the binary and the labels (default: the name's tag)")
	flag.StringVar(&o.Revision, "revision", "", "Git commit for the org.opencontainers.image.revision label")
	flag.StringVar(&platforms, "platforms", "", "comma-separated linux/<arch> list (default: linux/amd64 and the host's)")
	flag.StringVar(&o.CACertsFile, "ca-certs", imagebuild.DefaultCACertsFile, "CA bundle to copy (Debian's ca-certificates)")
	flag.StringVar(&out, "out", "dist", "output directory: <out>/syncmedic-image.tar and the layout <out>/oci")
	flag.Parse()
	if o.Version == "" {
		o.Version = o.Name[strings.LastIndexByte(o.Name, ':')+1:]
	}
	if platforms != "" {
		o.Platforms = strings.Split(platforms, ",")
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
		}
		o.Epoch = time.Unix(sec, 0)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	o.ModuleRoot = root
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	layout, err := imagebuild.Build(ctx, o)
	if err != nil {
		return err
	}
	archive, err := layout.Tar()
	if err != nil {
		return err
	}
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := layout.WriteDir(dir); err != nil {
		return err
	}
	tarPath := filepath.Join(out, "syncmedic-image.tar")
	if err := os.WriteFile(tarPath, archive, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n  archive: %s\n  layout:  %s\n", o.Name, layout.Digest, tarPath, dir)
	return nil
}
