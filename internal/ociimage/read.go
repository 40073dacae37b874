package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// FileData returns the data of the file at path among files (as ReadLayer returns them).
func FileData(files []File, path string) ([]byte, error) {
	for _, f := range files {
		if f.Path == path {
			return f.Data, nil
		}
	}
	return nil, fmt.Errorf("no %s in the layer", path)
}

// ReadLayer reads a layout archive (Layout.Tar) back: the files of the layer of the image for goos/goarch, as the
// archive holds them (a regular file's Data, every entry's Mode, owner and type), with the manifest's configuration
// blob. It follows index.json through an image index when there is one, and fails on anything it cannot follow.
func ReadLayer(archive []byte, goos, goarch string) (files []File, config []byte, err error) {
	dir, err := extract(archive)
	if err != nil {
		return nil, nil, err
	}
	defer removeAll(dir)
	img, err := platformImage(dir, goos, goarch)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if cfg.OS != goos || cfg.Architecture != goarch {
		return nil, nil, fmt.Errorf("the image is %s/%s, not %s/%s", cfg.OS, cfg.Architecture, goos, goarch)
	}
	if config, err = img.RawConfigFile(); err != nil {
		return nil, nil, err
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return nil, nil, fmt.Errorf("want one layer, got %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	files, err = readLayer(rc)
	return files, config, err
}

// platformImage opens the layout in dir and returns the image its index.json names, or the goos/goarch image of the
// image index it names.
func platformImage(dir, goos, goarch string) (v1.Image, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	index, err := top.IndexManifest()
	if err != nil || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: want one manifest (%v)", err)
	}
	desc := index.Manifests[0]
	if !desc.MediaType.IsIndex() {
		return top.Image(desc.Digest)
	}
	nested, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("image index %s: %w", desc.Digest, err)
	}
	m, err := nested.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image index %s: %w", desc.Digest, err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == goos && d.Platform.Architecture == goarch {
			return nested.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image index %s has no %s/%s manifest", desc.Digest, goos, goarch)
}

// extract writes the regular files of a layout archive into a new temporary directory.
func extract(archive []byte) (string, error) {
	dir, err := os.MkdirTemp("", "ociimage-read-")
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir, nil
		}
		if err == nil && h.Typeflag == tar.TypeReg {
			err = writeEntry(dir, h.Name, tr)
		}
		if err != nil {
			removeAll(dir)
			return "", err
		}
	}
}

// writeEntry writes the archive entry name into dir; a name that leaves dir is an error.
func writeEntry(dir, name string, r io.Reader) error {
	if !filepath.IsLocal(name) {
		return fmt.Errorf("layout archive entry %q leaves the layout", name)
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func removeAll(dir string) { _ = os.RemoveAll(dir) }

// readLayer lists the entries of an uncompressed layer.
func readLayer(layer io.Reader) ([]File, error) {
	var files []File
	tr := tar.NewReader(layer)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		f := File{Path: strings.TrimSuffix(h.Name, "/"), Mode: h.Mode, UID: h.Uid, GID: h.Gid}
		switch h.Typeflag {
		case tar.TypeDir:
			f.Dir = true
		case tar.TypeSymlink:
			f.Link = h.Linkname
		case tar.TypeReg:
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
		files = append(files, f)
	}
}
