package ociimage

import (
	"archive/tar"
	"bytes"
	"path"
	"sort"
	"time"
)

// File is one entry of an image's layer: a regular file (Data, Mode), a directory (Dir) or a symbolic link (Link),
// owned by UID and GID. Path is relative to the image's root, without a leading or trailing slash.
type File struct {
	Path     string
	Data     []byte
	Mode     int64
	Dir      bool
	Link     string
	UID, GID int
}

// WithParents returns files with a directory entry (0755, root) added for every parent directory of an entry that
// files does not list as a directory already, in path order after the entries of files.
func WithParents(files []File) []File {
	listed, dirs := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		if f.Dir {
			listed[f.Path] = true
		}
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		if !listed[d] {
			sorted = append(sorted, d)
		}
	}
	sort.Strings(sorted)
	out := append([]File(nil), files...)
	for _, d := range sorted {
		out = append(out, File{Path: d, Dir: true, Mode: 0o755})
	}
	return out
}

// layerTar writes files as a tar archive sorted by path, every entry dated mtime, with the given owners and modes
// only (no user or group names, no access or change times), so the bytes depend on the files alone. A directory
// without Mode gets 0755, a link 0777.
func layerTar(files []File, mtime time.Time) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range sorted {
		h := &tar.Header{Name: f.Path, ModTime: mtime, Format: tar.FormatPAX, Mode: f.Mode, Uid: f.UID, Gid: f.GID}
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, f.Path+"/"
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
