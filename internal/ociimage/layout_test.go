package ociimage

import (
	"encoding/json"
	"testing"
	"time"

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
		name   string
		images []Image
	}{
		{"one platform, uncompressed", []Image{testImage("amd64", false, amd)}},
		{"two platforms, gzip", []Image{testImage("amd64", true, amd), testImage("arm64", true, arm)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Build("ghcr.io/x/y:v1", time.Unix(0, 0), c.images...)
			require.NoError(t, err)
			archive, err := l.Tar()
			require.NoError(t, err)
			var index indexJSON
			require.NoError(t, json.Unmarshal(l.Index(), &index))
			require.Len(t, index.Manifests, 1)
			require.Equal(t, l.Digest, index.Manifests[0].Digest)
			require.Equal(t, "ghcr.io/x/y:v1", index.Manifests[0].Annotations["io.containerd.image.name"])
			require.Equal(t, "v1", index.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
			for _, img := range c.images {
				files, config, err := ReadLayer(archive, "linux", img.Config.Architecture)
				require.NoError(t, err)
				require.Equal(t, img.Files, files)
				var cfg configJSON
				require.NoError(t, json.Unmarshal(config, &cfg))
				require.Equal(t, img.Config.Architecture, cfg.Architecture)
				require.Equal(t, "65532:65532", cfg.Config.User)
			}
			_, _, err = ReadLayer(archive, "linux", "s390x")
			require.ErrorContains(t, err, "s390x")
			var docker []dockerManifestJSON
			require.NoError(t, json.Unmarshal(l.docker, &docker))
			require.Len(t, docker, 1, "docker's manifest.json names the first image")
			require.Equal(t, []string{"ghcr.io/x/y:v1"}, docker[0].RepoTags)
			require.NotNil(t, l.Blob("sha256:"+docker[0].Config[len("blobs/sha256/"):]))
		})
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
