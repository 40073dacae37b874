package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// HelmCommand is the real helm CLI (bin/helm, built by hack/helm-tools.sh) with args and a private helm home:
// nothing is read from or written to the user's helm configuration. Under -short (no tools) the test is skipped;
// without bin/helm it fails, saying to run `make tools-helm`.
func HelmCommand(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("needs bin/helm (make tools-helm); skipped under -short")
	}
	bin, err := BinDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	path := filepath.Join(bin, "helm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("helm not found in %s: run `make tools-helm` first", bin)
	}
	cmd := exec.Command(path, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	return cmd
}
