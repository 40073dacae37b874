package ociimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The OCI media types of the blobs a layout holds.
const (
	MediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Config is what an image's configuration says besides its layer: the platform, and how its container starts.
type Config struct {
	OS, Architecture string
	User             string
	Entrypoint, Cmd  []string
	Env              []string
	WorkingDir       string
	Labels           map[string]string
	// Created dates the image (omitted when zero); CreatedBy is its history entry.
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

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Platform is the platform of a manifest in an image index.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Layout is an OCI image layout holding one image under one name: index.json points at the image's manifest (one
// platform) or at an image index of its manifests (several), annotated with the name for `ctr images import`.
type Layout struct {
	// Name is the image's reference (registry/repository:tag); Digest the digest of what index.json points at,
	// the image's digest once pushed.
	Name, Digest string
	index        []byte
	// docker is the manifest.json of `docker save` for the first image, so `docker load` of any version reads
	// the archive too.
	docker []byte
	blobs  map[string][]byte
}

type manifestJSON struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

type indexJSON struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

type configJSON struct {
	Created      *time.Time `json:"created,omitempty"`
	Architecture string     `json:"architecture"`
	OS           string     `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Cmd        []string          `json:"Cmd,omitempty"`
		WorkingDir string            `json:"WorkingDir,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []map[string]any `json:"history,omitempty"`
}

type dockerManifestJSON struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// Build assembles the layout of the image name from one Image per platform, every layer entry dated mtime. The
// result is a pure function of its arguments.
func Build(name string, mtime time.Time, images ...Image) (*Layout, error) {
	if len(images) == 0 {
		return nil, errors.New("ociimage: no image to build")
	}
	l := &Layout{Name: name, blobs: map[string][]byte{}}
	var manifests []Descriptor
	for i, img := range images {
		m, layerPath, configPath, err := l.addImage(img, mtime)
		if err != nil {
			return nil, fmt.Errorf("ociimage: %s/%s: %w", img.Config.OS, img.Config.Architecture, err)
		}
		manifests = append(manifests, m)
		if i == 0 {
			if l.docker, err = json.Marshal([]dockerManifestJSON{{Config: configPath, RepoTags: []string{name},
				Layers: []string{layerPath}}}); err != nil {
				return nil, err
			}
		}
	}
	top := manifests[0]
	if len(manifests) > 1 {
		b, err := json.Marshal(indexJSON{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: manifests})
		if err != nil {
			return nil, err
		}
		top = l.add(MediaTypeIndex, b)
	}
	top.Platform = nil
	top.Annotations = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": name[strings.LastIndexByte(name, ':')+1:],
	}
	l.Digest = top.Digest
	var err error
	l.index, err = json.Marshal(indexJSON{SchemaVersion: 2, MediaType: MediaTypeIndex, Manifests: []Descriptor{top}})
	return l, err
}

// addImage adds an image's layer, configuration and manifest, and returns the manifest's descriptor and the
// layout paths of its layer and configuration.
func (l *Layout) addImage(img Image, mtime time.Time) (Descriptor, string, string, error) {
	layer, err := layerTar(img.Files, mtime)
	if err != nil {
		return Descriptor{}, "", "", err
	}
	diffID := digestOf(layer)
	layerType := MediaTypeLayer
	if img.Gzip {
		if layer, err = gzipBytes(layer); err != nil {
			return Descriptor{}, "", "", err
		}
		layerType = MediaTypeLayerGzip
	}
	c := img.Config
	var cfg configJSON
	cfg.Architecture, cfg.OS = c.Architecture, c.OS
	if !c.Created.IsZero() {
		created := c.Created.UTC()
		cfg.Created = &created
	}
	cfg.Config.User, cfg.Config.Env, cfg.Config.Entrypoint, cfg.Config.Cmd = c.User, c.Env, c.Entrypoint, c.Cmd
	cfg.Config.WorkingDir, cfg.Config.Labels = c.WorkingDir, c.Labels
	cfg.RootFS.Type, cfg.RootFS.DiffIDs = "layers", []string{diffID}
	if c.CreatedBy != "" {
		h := map[string]any{"created_by": c.CreatedBy}
		if cfg.Created != nil {
			h["created"] = cfg.Created
		}
		cfg.History = []map[string]any{h}
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return Descriptor{}, "", "", err
	}
	layerDesc, configDesc := l.add(layerType, layer), l.add(MediaTypeConfig, config)
	manifest, err := json.Marshal(manifestJSON{SchemaVersion: 2, MediaType: MediaTypeManifest, Config: configDesc,
		Layers: []Descriptor{layerDesc}})
	if err != nil {
		return Descriptor{}, "", "", err
	}
	m := l.add(MediaTypeManifest, manifest)
	m.Platform = &Platform{Architecture: c.Architecture, OS: c.OS}
	return m, blobPath(layerDesc.Digest), blobPath(configDesc.Digest), nil
}

// add stores blob and returns its descriptor.
func (l *Layout) add(mediaType string, blob []byte) Descriptor {
	d := Descriptor{MediaType: mediaType, Digest: digestOf(blob), Size: len(blob)}
	l.blobs[d.Digest] = blob
	return d
}

// Blob returns the blob of digest, or nil when the layout has none.
func (l *Layout) Blob(digest string) []byte { return l.blobs[digest] }

// Index returns the layout's index.json.
func (l *Layout) Index() []byte { return l.index }

// files returns the layout's files: oci-layout, index.json, docker's manifest.json and the blobs.
func (l *Layout) files() []File {
	files := []File{
		{Path: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`), Mode: 0o644},
		{Path: "index.json", Data: l.index, Mode: 0o644},
		{Path: "manifest.json", Data: l.docker, Mode: 0o644},
		{Path: "blobs", Dir: true}, {Path: "blobs/sha256", Dir: true},
	}
	digests := make([]string, 0, len(l.blobs))
	for d := range l.blobs {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		files = append(files, File{Path: blobPath(d), Data: l.blobs[d], Mode: 0o644})
	}
	return files
}

// Tar returns the layout as one tar archive: `ctr images import`, `kind load image-archive`, `docker load` and
// `crane push` read it.
func (l *Layout) Tar() ([]byte, error) {
	return layerTar(l.files(), time.Unix(0, 0))
}

// WriteDir writes the layout into dir (created; what it held before is left in place).
func (l *Layout) WriteDir(dir string) error {
	for _, f := range l.files() {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if f.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func blobPath(digest string) string {
	return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
