package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCMPLint(t *testing.T) {
	apps := filepath.Join("..", "..", "argocd", "cmp", "testdata", "apps")
	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"a clean app exits 0", []string{"cmp", "lint", filepath.Join(apps, "kustomize-clean")}, exitOK,
			[]string{"Kustomize, 2 document(s)", "no hazards"}},
		{"hazards exit 1 with each object and its fix", []string{"cmp", "lint", filepath.Join(apps, "kustomize-hazards"), "--namespace", "payments"}, exitStuck,
			[]string{"- hook-no-delete-policy: Job payments/schema-upgrade", "fix: add annotation argocd.argoproj.io/hook-delete-policy: BeforeHookCreation"}},
		{"helm values come from flags", []string{"cmp", "lint", filepath.Join(apps, "helm-clean"), "--app-name", "shop", "--set", "image=nginx:1.28"}, exitOK,
			[]string{"Helm, 2 document(s)"}},
		{"an unknown fix is a usage error", []string{"cmp", "lint", filepath.Join(apps, "helm-clean"), "--fix", "everything"}, exitUsage, nil},
		{"a directory that does not exist is a usage error, not a failed action", []string{"cmp", "lint", filepath.Join(apps, "no-such-app")}, exitUsage, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tt.args...)
			require.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errOut)
			for _, want := range tt.contains {
				require.Contains(t, out, want)
			}
		})
	}
}

func TestCMPLintWithoutAnArgumentLintsTheCurrentDirectory(t *testing.T) {
	t.Chdir(filepath.Join("..", "..", "argocd", "cmp", "testdata", "apps", "kustomize-clean"))
	code, out, errOut := runCLI(t, "cmp", "lint")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, ".: Kustomize, 2 document(s)")
}

func TestCMPGenerateReadsTheWorkingDirectoryAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	job := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: PreSync\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(job), 0o644))
	t.Chdir(dir)
	t.Setenv("ARGOCD_APP_NAME", "shop")
	t.Setenv("ARGOCD_APP_NAMESPACE", "web")

	code, out, errOut := runCLI(t, "cmp", "generate")
	require.Equal(t, exitOK, code)
	require.Equal(t, job, out, "the manifests are printed unchanged")
	require.Contains(t, errOut, "- hook-no-delete-policy: Job migrate (job.yaml)")

	t.Setenv("PARAM_STRICT", "true")
	code, out, errOut = runCLI(t, "cmp", "generate")
	require.Equal(t, exitStuck, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "syncmedic: strict mode: 2 hazard(s)")

	t.Setenv("PARAM_STRICT", "maybe")
	code, _, errOut = runCLI(t, "cmp", "generate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "parameter strict")
}
