package secretfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// mountedSecret lays out a Secret volume as the kubelet does (atomic writer): key -> ..data/key, ..data -> a
// timestamped directory holding the files.
type mountedSecret struct {
	t   *testing.T
	dir string
	n   int
}

func newMountedSecret(t *testing.T, key, value string) *mountedSecret {
	m := &mountedSecret{t: t, dir: t.TempDir()}
	m.update(key, value)
	require.NoError(t, os.Symlink(filepath.Join("..data", key), filepath.Join(m.dir, key)))
	return m
}

// update writes a new timestamped directory and swaps ..data to it with a rename, as the kubelet does.
func (m *mountedSecret) update(key, value string) {
	m.n++
	ts := filepath.Join(m.dir, "..2026_11_26_14_00_0"+string(rune('0'+m.n)))
	require.NoError(m.t, os.Mkdir(ts, 0o755))
	require.NoError(m.t, os.WriteFile(filepath.Join(ts, key), []byte(value), 0o644))
	tmp := filepath.Join(m.dir, "..data_tmp")
	require.NoError(m.t, os.Symlink(filepath.Base(ts), tmp))
	require.NoError(m.t, os.Rename(tmp, filepath.Join(m.dir, "..data")))
}

func TestFileFollowsASecretUpdatedInPlace(t *testing.T) {
	m := newMountedSecret(t, "token", "first\n")
	f, err := Open("--api-token-file", filepath.Join(m.dir, "token"))
	require.NoError(t, err)
	require.Equal(t, "first", f.Value())

	m.update("token", "second-of-the-same") // a new file, the same path
	require.Equal(t, "second-of-the-same", f.Value())
	require.NoError(t, f.Err())

	m.update("token", "  \n") // emptied: the last good token stays, and Err says why
	require.Equal(t, "second-of-the-same", f.Value())
	require.ErrorContains(t, f.Err(), "--api-token-file "+filepath.Join(m.dir, "token")+" is empty")

	m.update("token", "third")
	require.Equal(t, "third", f.Value())
	require.NoError(t, f.Err())
}

func TestOpenRefusesAMissingOrEmptyFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Open("--api-token-file", filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "--api-token-file: ")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = Open("--api-token-file", empty)
	require.EqualError(t, err, "--api-token-file "+empty+" is empty")
}
