package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

func testImage(arch string, gz bool, files ...File) Image {
	return Image{Gzip: gz, Files: files, Config: Config{OS: "linux", Architecture: arch, Entrypoint: []string{"/bin/x"},
		User: "65532:65532", Labels: map[string]string{"b": "2", "a": "1"}}}
}

func TestBuildIsAPureFunctionOfItsInput(t *testing.T) {
	files := []File{{Path: "bin/x", Data: []byte("x"), Mode: 0o755}, {Path: "bin", Dir: true}, {Path: "bin/y", Link: "x"}}
	epoch := time.Unix(0, 0)
	build := func(t *testing.T, mtime time.Time, images ...Image) (*Layout, []byte) {
		l, err := Build("docker.io/local/x:1", mtime, images...)
		require.NoError(t, err)
		b, err := l.Tar()
		require.NoError(t, err)
		return l, b
	}
	for _, gz := range []bool{false, true} {
		layer := map[bool]string{false: "uncompressed", true: "gzip"}[gz]
		a, aTar := build(t, epoch, testImage("amd64", gz, files...))
		cases := []struct {
			name   string
			images []Image
			mtime  time.Time
			same   bool
		}{
			{"the same images built again", []Image{testImage("amd64", gz, files...)}, epoch, true},
			{"the same files in another order", []Image{testImage("amd64", gz, files[2], files[0], files[1])}, epoch, true},
			{"another file content", []Image{testImage("amd64", gz, File{Path: "bin/x", Data: []byte("y"), Mode: 0o755}, files[1], files[2])}, epoch, false},
			{"another mode", []Image{testImage("amd64", gz, File{Path: "bin/x", Data: []byte("x"), Mode: 0o700}, files[1], files[2])}, epoch, false},
			{"another owner", []Image{testImage("amd64", gz, File{Path: "bin/x", Data: []byte("x"), Mode: 0o755, UID: 1}, files[1], files[2])}, epoch, false},
			{"another time", []Image{testImage("amd64", gz, files...)}, time.Unix(1, 0), false},
			{"another platform", []Image{testImage("arm64", gz, files...)}, epoch, false},
		}
		for _, c := range cases {
			t.Run(layer+": "+c.name, func(t *testing.T) {
				b, bTar := build(t, c.mtime, c.images...)
				if c.same {
					require.Equal(t, a.Digest, b.Digest)
					require.Equal(t, aTar, bTar)
					return
				}
				require.NotEqual(t, a.Digest, b.Digest)
			})
		}
	}
}

func TestReadLayerFindsEachPlatformsFilesThroughTheIndex(t *testing.T) {
	amd := File{Path: "x", Data: []byte("amd64"), Mode: 0o755, UID: 65532, GID: 65532}
	arm := File{Path: "x", Data: []byte("arm64"), Mode: 0o755}
	cases := []struct {
		name      string
		images    []Image
		topType   types.MediaType
		layerType types.MediaType
	}{
		{"one platform, uncompressed", []Image{testImage("amd64", false, amd)}, types.OCIManifestSchema1, types.OCIUncompressedLayer},
		{"two platforms, gzip", []Image{testImage("amd64", true, amd), testImage("arm64", true, arm)}, types.OCIImageIndex, types.OCILayer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Build("ghcr.io/x/y:v1", time.Unix(0, 0), c.images...)
			require.NoError(t, err)
			archive, err := l.Tar()
			require.NoError(t, err)
			raw, err := l.Index()
			require.NoError(t, err)
			index, err := v1.ParseIndexManifest(bytes.NewReader(raw))
			require.NoError(t, err)
			require.Equal(t, types.OCIImageIndex, index.MediaType)
			require.Len(t, index.Manifests, 1)
			top := index.Manifests[0]
			require.Equal(t, l.Digest, top.Digest.String())
			require.Equal(t, c.topType, top.MediaType)
			require.Nil(t, top.Platform)
			require.Equal(t, map[string]string{"io.containerd.image.name": "ghcr.io/x/y:v1",
				"org.opencontainers.image.ref.name": "v1"}, top.Annotations)
			for _, img := range c.images {
				files, config, err := ReadLayer(archive, "linux", img.Config.Architecture)
				require.NoError(t, err)
				require.Equal(t, img.Files, files)
				cfg, err := v1.ParseConfigFile(bytes.NewReader(config))
				require.NoError(t, err)
				require.Equal(t, img.Config.Architecture, cfg.Architecture)
				require.Equal(t, "65532:65532", cfg.Config.User)
				require.Equal(t, time.Unix(0, 0).UTC(), cfg.Created.UTC(), "dated the layer's time when Created is zero")
			}
			_, _, err = ReadLayer(archive, "linux", "s390x")
			require.ErrorContains(t, err, "s390x")

			entries := archiveEntries(t, archive)
			var docker tarball.Manifest
			require.NoError(t, json.Unmarshal(entries["manifest.json"], &docker))
			require.Len(t, docker, 1, "docker's manifest.json names the first image")
			require.Equal(t, []string{"ghcr.io/x/y:v1"}, docker[0].RepoTags)
			require.Contains(t, entries, docker[0].Config)
			require.Len(t, docker[0].Layers, 1)
			require.Contains(t, entries, docker[0].Layers[0])
			require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(entries["oci-layout"]))
			require.Equal(t, raw, entries["index.json"])

			dir := t.TempDir()
			require.NoError(t, l.WriteDir(dir))
			for name, data := range entries {
				got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
				require.NoError(t, err)
				require.Equal(t, data, got, "WriteDir writes what Tar archives: %s", name)
			}
		})
	}
}

// archiveEntries returns the regular files of a tar archive by name, and checks every entry is dated the epoch and
// owned by root.
func archiveEntries(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		require.NoError(t, err)
		require.Equal(t, time.Unix(0, 0).UTC(), h.ModTime.UTC(), h.Name)
		require.Equal(t, 0, h.Uid, h.Name)
		if h.Typeflag == tar.TypeReg {
			require.Equal(t, int64(0o644), h.Mode, h.Name)
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			entries[h.Name] = b
		}
	}
}

func TestWithParentsAddsEachParentDirectoryOnce(t *testing.T) {
	got := WithParents([]File{{Path: "a/b/c"}, {Path: "a/b/d"}, {Path: "e"}, {Path: "f", Dir: true, Mode: 0o755}, {Path: "f/g"}})
	var paths []string
	for _, f := range got {
		if f.Dir {
			require.Equal(t, int64(0o755), f.Mode)
			paths = append(paths, f.Path)
		}
	}
	require.Equal(t, []string{"f", "a", "a/b"}, paths, "f is listed already")
	require.Len(t, got, 7)
}
