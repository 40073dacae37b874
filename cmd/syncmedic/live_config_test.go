package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// isolateCLIConfig points $HOME, $KUBECONFIG and $ARGOCD_CONFIG_DIR at an empty directory, so no configuration of the
// machine running the test is read, and returns that directory.
func isolateCLIConfig(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("ARGOCD_CONFIG_DIR", filepath.Join(home, "argocd"))
	t.Setenv("ARGOCD_AUTH_TOKEN", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a Pod: no in-cluster configuration either
	return home
}

// deadKubeconfig is a kubeconfig whose contexts each name a cluster at 127.0.0.1:port, where nothing listens; the
// first context is the current one.
func deadKubeconfig(ports ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: nobody\n  user:\n    token: not-a-secret\nclusters:\n")
	for _, p := range ports {
		b.WriteString("- name: c" + p + "\n  cluster:\n    server: https://127.0.0.1:" + p + "\n")
	}
	b.WriteString("contexts:\n")
	for _, p := range ports {
		b.WriteString("- name: ctx" + p + "\n  context:\n    cluster: c" + p + "\n    user: nobody\n")
	}
	b.WriteString("current-context: ctx" + ports[0] + "\n")
	return b.String()
}

func writeConfig(t *testing.T, path, content string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// argocdLoginConfig is an argocd CLI login configuration (as `argocd login` writes it) with one plaintext context per
// server, each with its own token; the first is the current context.
func argocdLoginConfig(servers ...string) string {
	var b strings.Builder
	b.WriteString("current-context: " + servers[0] + "\ncontexts:\n")
	for _, s := range servers {
		b.WriteString("- name: " + s + "\n  server: " + s + "\n  user: " + s + "\n")
	}
	b.WriteString("servers:\n")
	for _, s := range servers {
		b.WriteString("- server: " + s + "\n  plain-text: true\n  grpc-web-root-path: \"\"\n")
	}
	b.WriteString("users:\n")
	for _, s := range servers {
		b.WriteString("- name: " + s + "\n  auth-token: token-of-" + s + "\n")
	}
	return b.String()
}

// TestScanFindsTheClusterLikeKubectl: with no source flag, scan reads the cluster of $KUBECONFIG (merged, as
// kubectl does), else ~/.kube/config; --context picks another context; a dump alone reads neither.
func TestScanFindsTheClusterLikeKubectl(t *testing.T) {
	stuck := filepath.Join("..", "..", "examples", "stuck-cluster")
	tests := []struct {
		name    string
		setup   func(t *testing.T, home string)
		args    []string
		code    int
		errWant string
	}{
		{"no source and no configuration says what to give", nil, []string{"scan"}, exitUsage, "nothing to scan"},
		{"$KUBECONFIG is read when no source is given", func(t *testing.T, home string) {
			t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "k"), deadKubeconfig("1")))
		}, []string{"scan"}, exitFailed, "127.0.0.1:1"},
		{"~/.kube/config is read when $KUBECONFIG is unset", func(t *testing.T, home string) {
			writeConfig(t, filepath.Join(home, ".kube", "config"), deadKubeconfig("2"))
		}, []string{"scan"}, exitFailed, "127.0.0.1:2"},
		{"$KUBECONFIG's files are merged: the first current-context wins", func(t *testing.T, home string) {
			first := writeConfig(t, filepath.Join(home, "current"), "apiVersion: v1\nkind: Config\ncurrent-context: ctx4\n")
			second := writeConfig(t, filepath.Join(home, "clusters"), deadKubeconfig("3", "4"))
			t.Setenv("KUBECONFIG", first+string(os.PathListSeparator)+second)
		}, []string{"scan"}, exitFailed, "127.0.0.1:4"},
		{"--context picks a context of $KUBECONFIG", func(t *testing.T, home string) {
			t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "k"), deadKubeconfig("5", "6")))
		}, []string{"scan", "--context", "ctx6"}, exitFailed, "127.0.0.1:6"},
		{"--context picks a context of --kubeconfig, which $KUBECONFIG does not override", func(t *testing.T, home string) {
			t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "other"), deadKubeconfig("9")))
		}, []string{"scan", "--kubeconfig", "testdata/two-contexts.kubeconfig", "--context", "second"}, exitFailed, "127.0.0.1:8"},
		{"an unknown context is a usage error naming it", func(t *testing.T, home string) {
			t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "k"), deadKubeconfig("7")))
		}, []string{"scan", "--context", "nope"}, exitUsage, `context "nope" does not exist`},
		{"a dump alone never reads $KUBECONFIG", func(t *testing.T, home string) {
			t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "k"), deadKubeconfig("1")))
			writeConfig(t, filepath.Join(home, ".kube", "config"), deadKubeconfig("2"))
		}, []string{"scan", "--snapshot", stuck, "--now", judgedAt}, exitStuck, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := isolateCLIConfig(t)
			if tt.setup != nil {
				tt.setup(t, home)
			}
			code, out, errOut := runCLI(t, tt.args...)
			require.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Contains(t, errOut, tt.errWant)
			if tt.code == exitStuck {
				require.NotContains(t, out, "Read cluster")
			}
		})
	}
}

// TestFixFindsTheClusterLikeKubectl: fix with no source flag reads the cluster of $KUBECONFIG too, and without one
// says which sources it needs.
func TestFixFindsTheClusterLikeKubectl(t *testing.T) {
	home := isolateCLIConfig(t)
	code, _, errOut := runCLI(t, "fix", "0123456789abcdef")
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "fix needs a live source")

	t.Setenv("KUBECONFIG", writeConfig(t, filepath.Join(home, "k"), deadKubeconfig("1", "2")))
	code, _, errOut = runCLI(t, "fix", "0123456789abcdef", "--context", "ctx2")
	require.Equal(t, exitFailed, code, errOut)
	require.Contains(t, errOut, "127.0.0.1:2")
}

// TestScanReadsTheArgoCDLogin: --argocd-context takes the server, token and TLS settings of an `argocd login`
// context ($ARGOCD_CONFIG_DIR/config); with no source at all, the current context is read as the argocd CLI does.
func TestScanReadsTheArgoCDLogin(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		args    []string
		code    int
		errWant string
	}{
		{"--argocd-context dials that context's server", argocdLoginConfig("127.0.0.1:1", "127.0.0.1:2"),
			[]string{"scan", "--argocd-context", "127.0.0.1:2"}, exitFailed, "argocd 127.0.0.1:2"},
		{"with no source, the current context is dialled", argocdLoginConfig("127.0.0.1:3", "127.0.0.1:2"),
			[]string{"scan"}, exitFailed, "argocd 127.0.0.1:3"},
		{"an unknown context names the configuration and how to list its contexts", argocdLoginConfig("127.0.0.1:1"),
			[]string{"scan", "--argocd-context", "nope"}, exitUsage, "Context 'nope' undefined (`argocd context` lists the contexts)"},
		{"--argocd-context without a login configuration says to log in", "",
			[]string{"scan", "--argocd-context", "prod"}, exitUsage, "there is no argocd login configuration"},
		{"--argocd-context and --argocd-server exclude each other", argocdLoginConfig("127.0.0.1:1"),
			[]string{"scan", "--argocd-context", "127.0.0.1:1", "--argocd-server", "127.0.0.1:1"}, exitUsage, "exclude each other"},
		{"a --core login is refused: syncmedic needs argocd-server",
			"current-context: core\ncontexts:\n- name: core\n  server: kubernetes\n  user: kubernetes\nservers:\n- server: kubernetes\n  core: true\nusers:\n- name: kubernetes\n",
			[]string{"scan", "--argocd-context", "core"}, exitUsage, "argocd login --core"},
		{"with no source, a current context that cannot be used says how to scan the cluster alone",
			"current-context: core\ncontexts:\n- name: core\n  server: kubernetes\n  user: kubernetes\nservers:\n- server: kubernetes\n  core: true\nusers:\n- name: kubernetes\n",
			[]string{"scan"}, exitUsage, "argocd login --core`: syncmedic reads Argo CD through argocd-server, give --argocd-server; with no source flag its current context is read: give --kubeconfig or --context for the cluster alone"},
		{"a context without a token says to log in again",
			"current-context: a\ncontexts:\n- name: a\n  server: a:443\n  user: a:443\nservers:\n- server: a:443\nusers:\n- name: a:443\n",
			[]string{"scan", "--argocd-context", "a"}, exitUsage, "holds no token: run `argocd login a:443` again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := isolateCLIConfig(t)
			if tt.config != "" {
				writeConfig(t, filepath.Join(home, "argocd", "config"), tt.config)
			}
			code, out, errOut := runCLI(t, tt.args...)
			require.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errOut)
			require.Contains(t, errOut, tt.errWant)
			require.NotContains(t, errOut, "token-of-", "a token from the login configuration was printed")
		})
	}
}
