package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/internal/testenv"
)

func TestRanBinaryNamesTheBinaryOfEachSingleRelease(t *testing.T) {
	for _, tc := range []struct {
		row           Row
		file, version string
		ok            bool
	}{
		{Row{Tool: "Argo CD", Version: "v3.6.1"}, "argocd-v3.6.1", "v3.6.1", true},
		{Row{Tool: "Argo Workflows", Version: "v3.5.10"}, "workflow-controller-v3.5.10", "v3.5.10", true},
		{Row{Tool: "Flux", Version: "helm-controller v1.4.3"}, "helm-controller-v1.4.3", "v1.4.3", true},
		{Row{Tool: "Flux", Version: "kustomize-controller v1.7.3"}, "kustomize-controller-v1.7.3", "v1.7.3", true},
		{Row{Tool: "Flux", Version: "helm-controller v0.37.2 → v1.4.3"}, "", "", false},
		{Row{Tool: "Argo CD", Version: "v3.6.1's pinned `argo-ui` commit f941b0a3"}, "", "", false},
	} {
		file, version, ok := ranBinary(tc.row)
		require.Equal(t, []any{tc.file, tc.version, tc.ok}, []any{file, version, ok}, tc.row.Version)
	}
}

// The test binary itself stands for a controller: its build information says "(devel)", not the row's release.
func TestVerifyVersionReadsTheBinarysBuildInformation(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "kustomize-controller-v1.7.3")))
	err = VerifyVersion(Row{Tool: "Flux", Version: "kustomize-controller v1.7.3"}, dir)
	require.ErrorContains(t, err, "reports module version (devel)")
	err = VerifyVersion(Row{Tool: "Flux", Version: "helm-controller v1.4.3"}, dir)
	require.ErrorContains(t, err, "make tools builds it")
	require.NoError(t, VerifyVersion(Row{Tool: "Flux", Version: "helm-controller v0.37.2 → v1.4.3"}, dir), "an upgrade row names two binaries: not checked")
}

func TestVerifyVersionAcceptsTheToolsBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("reads bin/ (make tools); skipped under -short")
	}
	for _, r := range []Row{{Tool: "Argo CD", Version: "v2.14.21"}, {Tool: "Argo CD", Version: "v3.6.1"}, {Tool: "Argo CD", Version: "v3.0.12"},
		{Tool: "Flux", Version: "helm-controller v1.4.3"}, {Tool: "Flux", Version: "helm-controller v0.37.2"},
		{Tool: "Flux", Version: "kustomize-controller v1.7.3"}, {Tool: "Argo Workflows", Version: "v3.5.10"}, {Tool: "Argo Workflows", Version: "v3.6.2"}} {
		bin, err := testenv.BinDir()
		require.NoError(t, err)
		require.NoError(t, VerifyVersion(r, bin), r.Version)
	}
}
