package ociimage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Config is what an image's configuration says besides its layer: the platform, and how its container starts.
type Config struct {
	OS, Architecture string
	User             string
	Entrypoint, Cmd  []string
	Env              []string
	WorkingDir       string
	Labels           map[string]string
	// Created dates the image and its history entry (default: the layer entries' time); CreatedBy is its history
	// entry.
	Created   time.Time
	CreatedBy string
}

// Image is one platform's image: a configuration and the files of its single layer, gzip-compressed when Gzip is
// set (smaller to push; containerd and docker read both).
type Image struct {
	Config Config
	Files  []File
	Gzip   bool
}

// Layout is an OCI image layout holding one image under one name: index.json points at the image's manifest (one
// platform) or at an image index of its manifests (several), annotated with the name for `ctr images import`.
type Layout struct {
	// Name is the image's reference (registry/repository:tag); Digest the digest of what index.json points at,
	// the image's digest once pushed.
	Name, Digest string
	// index is what index.json lists: the image or the image index, annotated with Name.
	index v1.ImageIndex
	// docker is the manifest.json of `docker save` for the first image, so `docker load` of any version reads
	// the archive too.
	docker tarball.Manifest
}

// Build assembles the layout of the image name from one Image per platform, every layer entry dated mtime. The
// result is a pure function of its arguments.
func Build(name string, mtime time.Time, images ...Image) (*Layout, error) {
	if len(images) == 0 {
		return nil, errors.New("ociimage: no image to build")
	}
	l := &Layout{Name: name}
	platforms := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var top mutate.Appendable
	for i, img := range images {
		built, err := buildImage(img, mtime)
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s/%s: %w", img.Config.OS, img.Config.Architecture, err)
		}
		if i == 0 {
			if l.docker, err = dockerManifest(name, built); err != nil {
				return nil, err
			}
		}
		top = built
		platforms = mutate.AppendManifests(platforms, mutate.IndexAddendum{Add: built, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: img.Config.OS, Architecture: img.Config.Architecture}}})
	}
	if len(images) > 1 {
		top = platforms
	}
	l.index = mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add: top, Descriptor: v1.Descriptor{Annotations: map[string]string{
			"io.containerd.image.name":          name,
			"org.opencontainers.image.ref.name": name[strings.LastIndexByte(name, ':')+1:],
		}}})
	digest, err := top.Digest()
	if err != nil {
		return nil, err
	}
	l.Digest = digest.String()
	return l, nil
}

// buildImage assembles img: its layer, then its configuration and OCI media types.
func buildImage(img Image, mtime time.Time) (v1.Image, error) {
	tar, err := layerTar(img.Files, mtime)
	if err != nil {
		return nil, err
	}
	layer := static.NewLayer(tar, types.OCIUncompressedLayer)
	if img.Gzip {
		// gzip at go-containerregistry's default level, with no name or time in the header.
		if layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(tar)), nil
		}, tarball.WithMediaType(types.OCILayer)); err != nil {
			return nil, err
		}
	}
	c := img.Config
	if c.Created.IsZero() {
		c.Created = mtime
	}
	created := v1.Time{Time: c.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	withLayer, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{Created: created, CreatedBy: c.CreatedBy}})
	if err != nil {
		return nil, err
	}
	cfg, err := withLayer.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = c.OS, c.Architecture, created
	cfg.Config = v1.Config{User: c.User, Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir,
		Labels: c.Labels}
	return mutate.ConfigFile(withLayer, cfg)
}

// dockerManifest is the manifest.json of `docker save` for img, named name, pointing into the layout's blobs.
func dockerManifest(name string, img v1.Image) (tarball.Manifest, error) {
	config, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	d := tarball.Descriptor{Config: blobPath(config), RepoTags: []string{name}}
	for _, layer := range layers {
		digest, err := layer.Digest()
		if err != nil {
			return nil, err
		}
		d.Layers = append(d.Layers, blobPath(digest))
	}
	return tarball.Manifest{d}, nil
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// Index returns the layout's index.json.
func (l *Layout) Index() ([]byte, error) { return l.index.RawManifest() }

// WriteDir writes the layout into dir (created; the blobs it held before are left in place): oci-layout,
// index.json and the blobs (go-containerregistry's layout writer), and docker's manifest.json.
func (l *Layout) WriteDir(dir string) error {
	if _, err := layout.Write(dir, l.index); err != nil {
		return fmt.Errorf("ociimage: writing the layout into %s: %w", dir, err)
	}
	b, err := json.Marshal(l.docker)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
}

// Tar returns the layout as one tar archive (the files WriteDir writes, dated the Unix epoch, owned by root, files
// 0644 and directories 0755): `ctr images import`, `kind load image-archive`, `docker load` and `crane push` read
// it.
func (l *Layout) Tar() ([]byte, error) {
	dir, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := l.WriteDir(dir); err != nil {
		return nil, err
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f := File{Path: filepath.ToSlash(rel), Dir: d.IsDir(), Mode: 0o644}
		if f.Dir {
			f.Mode = 0o755
		} else if f.Data, err = os.ReadFile(p); err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return layerTar(files, time.Unix(0, 0))
}
