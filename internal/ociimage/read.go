package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ReadLayer reads a layout archive (Layout.Tar) back: the files of the layer of the image for os/arch, as the
// archive holds them (a regular file's Data, every entry's Mode, owner and type), with the manifest's configuration
// blob. It follows index.json through an image index when there is one, and fails on anything it cannot follow.
func ReadLayer(archive []byte, os, arch string) (files []File, config []byte, err error) {
	blobs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, err
			}
			blobs[h.Name] = b
		}
	}
	var index indexJSON
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, nil, fmt.Errorf("index.json: want one manifest, got %s (%v)", blobs["index.json"], err)
	}
	desc := index.Manifests[0]
	if desc.MediaType == MediaTypeIndex {
		var nested indexJSON
		if err := json.Unmarshal(blobs[blobPath(desc.Digest)], &nested); err != nil {
			return nil, nil, fmt.Errorf("image index %s: %w", desc.Digest, err)
		}
		found := false
		for _, m := range nested.Manifests {
			if m.Platform != nil && m.Platform.OS == os && m.Platform.Architecture == arch {
				desc, found = m, true
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("image index %s has no %s/%s manifest", desc.Digest, os, arch)
		}
	}
	var m manifestJSON
	if err := json.Unmarshal(blobs[blobPath(desc.Digest)], &m); err != nil || len(m.Layers) != 1 {
		return nil, nil, fmt.Errorf("manifest %s: want one layer (%v)", desc.Digest, err)
	}
	config = blobs[blobPath(m.Config.Digest)]
	var cfg configJSON
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	if cfg.OS != os || cfg.Architecture != arch {
		return nil, nil, fmt.Errorf("the image is %s/%s, not %s/%s", cfg.OS, cfg.Architecture, os, arch)
	}
	files, err = readLayer(blobs[blobPath(m.Layers[0].Digest)], m.Layers[0].MediaType == MediaTypeLayerGzip)
	return files, config, err
}

// readLayer lists a layer's entries.
func readLayer(layer []byte, gzipped bool) ([]File, error) {
	var r io.Reader = bytes.NewReader(layer)
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		r = zr
	}
	var files []File
	tr := tar.NewReader(r)
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
