package repofs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// errReadOnly is returned for the writes kustomize's FileSystem interface offers; a build writes nothing.
var errReadOnly = errors.New("the repository is read-only to the plugin")

// FileSystem returns kustomize's view of the root: filesys.MakeFsOnDisk, except that every path is resolved and must
// stay inside the root (a kustomization, a base or a file they name outside it is an error), files are read only when
// regular and at most MaxFileSize, and nothing is written.
func (r *Root) FileSystem() filesys.FileSystem {
	return confined{root: r, disk: filesys.MakeFsOnDisk()}
}

// RemoteFileSystem is FileSystem that also reads the directories kustomize clones remote bases into
// (filesys.NewTmpConfirmedDir: <temp dir>/kustomize-*), for apps that opted in to remote bases.
func (r *Root) RemoteFileSystem() filesys.FileSystem {
	tmp, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		tmp = os.TempDir()
	}
	return confined{root: r, disk: filesys.MakeFsOnDisk(), clones: tmp}
}

type confined struct {
	root *Root
	disk filesys.FileSystem
	// clones, when set, is the real temporary directory whose kustomize-* directories are readable too.
	clones string
}

var _ filesys.FileSystem = confined{}

// check resolves path (made absolute) inside the root.
func (c confined) check(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := c.root.ResolvePath(abs)
	if err != nil && c.clones != "" && (errors.Is(err, ErrOutside) || errors.Is(err, ErrSymlinkOut)) {
		if clone, ok := c.inClone(abs); ok {
			real, err = clone, nil
		}
	}
	if err != nil {
		return "", &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return real, nil
}

// inClone returns abs with its symbolic links resolved when that is inside a kustomize clone directory.
func (c confined) inClone(abs string) (string, bool) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(c.clones, real)
	if err != nil {
		return "", false
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return real, strings.HasPrefix(first, "kustomize-")
}

func (c confined) Create(path string) (filesys.File, error) { return nil, c.refuse(path) }
func (c confined) Mkdir(path string) error                  { return c.refuse(path) }
func (c confined) MkdirAll(path string) error               { return c.refuse(path) }

func (c confined) WriteFile(path string, _ []byte) error { return c.refuse(path) }

// RemoveAll removes only a kustomize clone directory (kustomize's cleanup of a remote base), nothing in the repository.
func (c confined) RemoveAll(path string) error {
	if abs, err := filepath.Abs(path); err == nil && c.clones != "" {
		if real, ok := c.inClone(abs); ok {
			return os.RemoveAll(real)
		}
	}
	return c.refuse(path)
}

func (c confined) refuse(path string) error {
	return &fs.PathError{Op: "write", Path: path, Err: errReadOnly}
}

func (c confined) Open(path string) (filesys.File, error) {
	real, err := c.check(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Lstat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return os.Open(real)
}

func (c confined) IsDir(path string) bool {
	real, err := c.check(path)
	return err == nil && c.disk.IsDir(real)
}

func (c confined) ReadDir(path string) ([]string, error) {
	real, err := c.check(path)
	if err != nil {
		return nil, err
	}
	return c.disk.ReadDir(real)
}

func (c confined) CleanedAbs(path string) (filesys.ConfirmedDir, string, error) {
	if _, err := c.check(path); err != nil {
		return "", "", err
	}
	return c.disk.CleanedAbs(path)
}

func (c confined) Exists(path string) bool {
	_, err := c.check(path)
	return err == nil
}

// Glob returns the matches inside the root; a match a symbolic link takes outside is an error.
func (c confined) Glob(pattern string) ([]string, error) {
	if _, err := c.check(filepath.Dir(pattern)); err != nil {
		return nil, err
	}
	matches, err := c.disk.Glob(pattern)
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if _, err := c.check(m); err != nil {
			return nil, err
		}
	}
	return matches, nil
}

func (c confined) ReadFile(path string) ([]byte, error) {
	real, err := c.check(path)
	if err != nil {
		return nil, err
	}
	b, err := readRegular(real, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Walk walks path, which must be inside the root; filepath.Walk does not follow symbolic links below it.
func (c confined) Walk(path string, walkFn filepath.WalkFunc) error {
	if _, err := c.check(path); err != nil {
		return err
	}
	return c.disk.Walk(path, walkFn)
}
