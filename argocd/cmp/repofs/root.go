package repofs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/argoproj/argo-cd/v2/common"
)

// MaxFileSize is the largest file the plugin reads: a values file, a kustomization or a manifest it names.
const MaxFileSize = 8 << 20 // 8 MiB

// The ways a path is refused. Errors wrap one of them, so callers and tests can tell them apart.
var (
	ErrAbsolute   = errors.New("is an absolute path")
	ErrURL        = errors.New("is a URL")
	ErrOutside    = errors.New("is outside the repository")
	ErrSymlinkOut = errors.New("is a symbolic link that leads outside the repository")
	ErrNotRegular = errors.New("is not a regular file")
	ErrTooLarge   = fmt.Errorf("is larger than the %d MiB limit", MaxFileSize>>20)
	ErrNotExist   = errors.New("does not exist")
)

// Root is a repository checked out on disk, by its real (symbolic-link free) absolute path.
type Root struct{ dir string }

// Open returns the repository whose root directory is dir.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("repository root %s: %w", dir, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("repository root %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("repository root %s is not a directory", dir)
	}
	return &Root{dir: real}, nil
}

// Dir returns the root's real absolute path.
func (r *Root) Dir() string { return r.dir }

// Contains reports whether path, an absolute path, is the root or below it (lexically: resolve it first).
func (r *Root) Contains(path string) bool {
	rel, err := filepath.Rel(r.dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Resolve returns the real path of name, a path relative to the directory base inside the root. name must not be
// absolute or a URL, and neither it nor any symbolic link on the way may lead outside the root.
func (r *Root) Resolve(base, name string) (string, error) {
	if strings.Contains(name, "://") {
		return "", ErrURL
	}
	if filepath.IsAbs(name) {
		return "", ErrAbsolute
	}
	return r.ResolvePath(filepath.Join(base, name))
}

// ResolvePath returns the real path of path (absolute, or relative to the working directory), which must lie inside
// the root both as written and with its symbolic links resolved.
func (r *Root) ResolvePath(path string) (string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if !r.Contains(path) {
		return "", ErrOutside
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNotExist
	}
	if err != nil {
		return "", err
	}
	if !r.Contains(real) {
		return "", ErrSymlinkOut
	}
	return real, nil
}

// ReadFile reads the regular file at path (see ResolvePath) when it is at most MaxFileSize bytes.
func (r *Root) ReadFile(path string) ([]byte, error) {
	real, err := r.ResolvePath(path)
	if err != nil {
		return nil, err
	}
	return readRegular(real, MaxFileSize)
}

// readRegular reads real, a path without symbolic links, if it is a regular file of at most limit bytes. The type is
// checked before opening (opening a FIFO would block) and again on the open file.
func readRegular(real string, limit int64) ([]byte, error) {
	before, err := os.Lstat(real)
	if err != nil {
		return nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if before.Size() > limit {
		return nil, ErrTooLarge
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	after, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		return nil, ErrNotRegular
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Find returns the repository root the cmp-server unpacked appDir into: the plugin runs in
// <ARGOCD_CMP_WORKDIR>/_cmp_server/<request>/<app path>, and <request> is the root of the copy Argo CD sent (the
// repository, or the common root of manifest-generate-paths). Run anywhere else (by hand, `syncmedic cmp lint`), the
// root is the nearest directory at or above appDir holding .git, or else appDir itself. environ is in os.Environ form.
func Find(appDir string, environ []string) (*Root, error) {
	app, err := filepath.Abs(appDir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(app); err == nil {
		app = real
	}
	for _, work := range cmpWorkDirs(environ) {
		rel, err := filepath.Rel(work, app)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		request, _, _ := strings.Cut(rel, string(filepath.Separator))
		return Open(filepath.Join(work, request))
	}
	for dir := app; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return Open(dir)
		}
		if filepath.Dir(dir) == dir {
			return Open(app)
		}
	}
}

// cmpWorkDirs returns where the cmp-server unpacks requests (Argo CD's common.GetCMPWorkDir for this environment), as
// written and with symbolic links resolved.
func cmpWorkDirs(environ []string) []string {
	base := os.TempDir()
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, common.EnvCMPWorkDir+"="); ok && v != "" {
			base = v
		}
	}
	dir := filepath.Join(base, common.DefaultCMPWorkDirName)
	out := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		out = append(out, real)
	}
	return out
}
