package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitRepo is a local git repository (made with the git binary) in a temporary directory, on branch main: the
// source of Applications run by a real Argo CD stack (repoURL: URL, a file:// URL the repo-server clones).
type GitRepo struct {
	// Dir is the repository's work tree.
	Dir string
	// URL is file://Dir.
	URL string
}

// NewGitRepo creates an empty repository with one initial commit (an empty README), removed when the test binary
// ends (a stack's repo-server may still read it after the test).
func NewGitRepo(t testing.TB) *GitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("testenv: git not found: run `make tools-argocd` (installs the Debian git package)")
	}
	dir, _, err := tempDir("git-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	r := &GitRepo{Dir: dir, URL: "file://" + dir}
	r.git(t, "init", "--quiet", "--initial-branch=main")
	r.Write(t, "README", "")
	r.Commit(t, "initial commit")
	return r
}

// Write writes content to the file at path (slash-separated, relative to the repository), creating directories.
func (r *GitRepo) Write(t testing.TB, path, content string) {
	t.Helper()
	p := filepath.Join(r.Dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Remove deletes the file or directory at path from the work tree.
func (r *GitRepo) Remove(t testing.TB, path string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(path))); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Commit stages every change and commits it on main, returning the new commit's SHA.
func (r *GitRepo) Commit(t testing.TB, message string) string {
	t.Helper()
	r.git(t, "add", "--all")
	r.git(t, "commit", "--quiet", "--allow-empty", "-m", message)
	return r.Head(t)
}

// Head returns the SHA of main's last commit.
func (r *GitRepo) Head(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(r.git(t, "rev-parse", "HEAD"))
}

func (r *GitRepo) git(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=testenv", "GIT_AUTHOR_EMAIL=testenv@example.invalid",
		"GIT_COMMITTER_NAME=testenv", "GIT_COMMITTER_EMAIL=testenv@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// String is the repository's URL.
func (r *GitRepo) String() string { return fmt.Sprint(r.URL) }
