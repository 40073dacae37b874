package repofs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// layout makes base/outside/secret.yaml and a repository base/repo with an app directory apps/web, a sibling
// apps/shared, and the symbolic links the cases use. It returns base and the repository root.
func layout(t *testing.T) (string, *Root) {
	t.Helper()
	base := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(base, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("outside/secret.yaml", "leaked: TOP-SECRET\n")
	write("repo/apps/web/values.yaml", "a: 1\n")
	write("repo/apps/shared/values.yaml", "b: 2\n")
	write("repo/apps/web/big.yaml", strings.Repeat("#", MaxFileSize+1))
	link := func(target, rel string) { require.NoError(t, os.Symlink(target, filepath.Join(base, rel))) }
	link("../shared/values.yaml", "repo/apps/web/in.yaml")
	link(filepath.Join(base, "repo", "apps", "shared", "values.yaml"), "repo/apps/web/in-abs.yaml")
	link("../../../outside/secret.yaml", "repo/apps/web/out.yaml")
	link("/dev/zero", "repo/apps/web/zero.yaml")
	link("../../../outside", "repo/apps/web/outdir")
	require.NoError(t, syscall.Mkfifo(filepath.Join(base, "repo", "apps", "web", "fifo.yaml"), 0o644))
	root, err := Open(filepath.Join(base, "repo"))
	require.NoError(t, err)
	return base, root
}

func TestResolveAndReadConfineToTheRoot(t *testing.T) {
	base, root := layout(t)
	app := filepath.Join(root.Dir(), "apps", "web")
	tests := []struct {
		name, path string
		want       string // the content read, when it is allowed
		err        error
	}{
		{"a file in the app directory", "values.yaml", "a: 1\n", nil},
		{"a file in a sibling directory inside the repository", "../shared/values.yaml", "b: 2\n", nil},
		{"a symbolic link to a file inside the repository", "in.yaml", "b: 2\n", nil},
		{"an absolute symbolic link to a file inside the repository (as Argo CD unpacks links)", "in-abs.yaml", "b: 2\n", nil},
		{"a path up and out of the repository", "../../../outside/secret.yaml", "", ErrOutside},
		{"a path that climbs out and back in by name", "../../../repo/apps/web/values.yaml", "a: 1\n", nil},
		{"an absolute path", filepath.Join(base, "outside", "secret.yaml"), "", ErrAbsolute},
		{"/dev/zero", "/dev/zero", "", ErrAbsolute},
		{"/dev/zero by climbing", strings.Repeat("../", 30) + "dev/zero", "", ErrOutside},
		{"a URL", "https://example.com/values.yaml", "", ErrURL},
		{"a symbolic link out of the repository", "out.yaml", "", ErrSymlinkOut},
		{"a symbolic link to /dev/zero", "zero.yaml", "", ErrSymlinkOut},
		{"a file below a symbolic link to a directory outside", "outdir/secret.yaml", "", ErrSymlinkOut},
		{"a directory", "../shared", "", ErrNotRegular},
		{"a FIFO (opening it would block)", "fifo.yaml", "", ErrNotRegular},
		{"a file over the size cap", "big.yaml", "", ErrTooLarge},
		{"a missing file", "nope.yaml", "", ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			real, err := root.Resolve(app, tt.path)
			var b []byte
			if err == nil {
				b, err = root.ReadFile(real)
			}
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.Nil(t, b)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, string(b))
		})
	}
}

func TestFindTheRepositoryRoot(t *testing.T) {
	base := t.TempDir()
	mkdir := func(rel string) string {
		p := filepath.Join(base, rel)
		require.NoError(t, os.MkdirAll(p, 0o755))
		real, err := filepath.EvalSymlinks(p)
		require.NoError(t, err)
		return real
	}
	request := mkdir("work/_cmp_server/0d9c-request")
	app := mkdir("work/_cmp_server/0d9c-request/apps/web")
	gitRepo := mkdir("checkout")
	mkdir("checkout/.git")
	gitApp := mkdir("checkout/deploy/app")
	bare := mkdir("bare/app")
	tests := []struct {
		name    string
		dir     string
		environ []string
		want    string
	}{
		{"the request directory of the cmp-server's work dir", app, []string{"ARGOCD_CMP_WORKDIR=" + filepath.Join(base, "work")}, request},
		{"the app directory itself when it is the request directory", request, []string{"ARGOCD_CMP_WORKDIR=" + filepath.Join(base, "work")}, request},
		{"the nearest directory with .git outside the cmp-server", gitApp, nil, gitRepo},
		{"the app directory when there is neither", bare, nil, bare},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, err := Find(tt.dir, tt.environ)
			require.NoError(t, err)
			require.Equal(t, tt.want, root.Dir())
		})
	}
}

func TestKustomizeFileSystemStaysInside(t *testing.T) {
	base, root := layout(t)
	fsys := root.FileSystem()
	app := filepath.Join(root.Dir(), "apps", "web")

	b, err := fsys.ReadFile(filepath.Join(app, "in.yaml"))
	require.NoError(t, err)
	require.Equal(t, "b: 2\n", string(b))
	require.True(t, fsys.IsDir(filepath.Join(root.Dir(), "apps", "shared")))

	for _, path := range []string{
		filepath.Join(base, "outside", "secret.yaml"),
		filepath.Join(app, "out.yaml"),
		filepath.Join(app, "outdir", "secret.yaml"),
		"/dev/zero",
	} {
		_, err := fsys.ReadFile(path)
		require.Error(t, err, path)
		require.NotContains(t, err.Error(), "TOP-SECRET")
		require.False(t, fsys.Exists(path), path)
		_, err = fsys.Open(path)
		require.Error(t, err, path)
	}
	_, _, err = fsys.CleanedAbs(filepath.Join(base, "outside"))
	require.ErrorIs(t, err, ErrOutside)
	_, err = fsys.ReadFile(filepath.Join(app, "fifo.yaml"))
	require.ErrorIs(t, err, ErrNotRegular)
	require.ErrorIs(t, fsys.WriteFile(filepath.Join(app, "new.yaml"), []byte("x")), errReadOnly)
	_, err = os.Stat(filepath.Join(app, "new.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
