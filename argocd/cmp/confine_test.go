package cmp

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
	"github.com/syncmedic/syncmedic/internal/testenv"
)

const secretValue = "TOP-SECRET-VALUE-42"

// writeFiles writes files (path relative to base → content) under base.
func writeFiles(t *testing.T, base string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(base, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// leakChart is a chart that prints .Values.leaked into a ConfigMap, as the reproduction in issue 43 did.
var leakChart = map[string]string{
	"Chart.yaml":        "apiVersion: v2\nname: leak\nversion: 0.1.0\n",
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  leaked: {{ .Values.leaked | default \"none\" | quote }}\n",
}

// confinementRepo writes base/outside/secret.yaml and a kustomization base/outside-base beside a repository base/repo holding the apps the cases use, and
// returns base, the repository and the secret's absolute path.
func confinementRepo(t *testing.T) (base, repo, secret string) {
	t.Helper()
	base = t.TempDir()
	repo = filepath.Join(base, "repo")
	writeFiles(t, base, map[string]string{
		"outside/secret.yaml":             "leaked: " + secretValue + "\n",
		"outside-base/kustomization.yaml": "resources:\n  - secret.yaml\n",
		"outside-base/secret.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leaked\ndata:\n  leaked: " + secretValue + "\n",
	})
	for rel, content := range leakChart {
		writeFiles(t, repo, map[string]string{filepath.Join("apps", "chart", rel): content})
	}
	writeFiles(t, repo, map[string]string{
		"apps/shared/values.yaml":      "leaked: SIBLING-OK\n",
		"apps/shared/linked.yaml":      "leaked: LINKED-OK\n",
		"apps/values/big.yaml":         "# " + strings.Repeat("x", repofs.MaxFileSize) + "\n",
		"apps/kust/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
		"apps/kust/kustomization.yaml": "resources:\n  - cm.yaml\n",
	})
	require.NoError(t, os.Symlink("../shared/linked.yaml", filepath.Join(repo, "apps", "chart", "linked.yaml")))
	return base, repo, filepath.Join(base, "outside", "secret.yaml")
}

// climb is a values-files entry that climbs from any app directory to the file system root and down to abs.
func climb(abs string) string { return strings.Repeat("../", 40) + strings.TrimPrefix(abs, "/") }

// bombArchive returns a subchart archive (<name>/Chart.yaml and files) whose files decompress to size bytes each.
func bombArchive(t *testing.T, name string, files int, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	chartYAML := fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 0.1.0\n", name)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: name + "/Chart.yaml", Mode: 0o644, Size: int64(len(chartYAML))}))
	_, err = tw.Write([]byte(chartYAML))
	require.NoError(t, err)
	zeros := make([]byte, 1<<20)
	for i := 0; i < files; i++ {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/zeros-%d.bin", name, i), Mode: 0o644, Size: size}))
		for left := size; left > 0; left -= int64(len(zeros)) {
			_, err = tw.Write(zeros[:min(left, int64(len(zeros)))])
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestPluginReadsNothingOutsideTheRepository sends apps to `syncmedic cmp generate` through Argo CD's own cmp-server
// (the repository as the repo-server sends it) with parameters and files that try to read outside the repository,
// fetch remote kustomize resources, or exhaust the plugin; each is refused with an error naming what and why, and the
// near misses inside the repository still render.
func TestPluginReadsNothingOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: needs the cmp-server and a go build")
	}
	bin := buildSyncmedic(t)
	cmpSrv := testenv.CMPServer(t, pluginYAML(t, bin))
	_, repo, secret := confinementRepo(t)
	chartApp := filepath.Join(repo, "apps", "chart")
	env := func(kv ...string) map[string]string {
		m := map[string]string{EnvAppName: "shop", EnvAppNamespace: "shop"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	t.Run("values files", func(t *testing.T) {
		tests := []struct {
			name, file, wantErr string
		}{
			{"a path climbing out of the repository", climb(secret), "is outside the repository"},
			{"an absolute path", secret, "is an absolute path"},
			{"/dev/zero", climb("/dev/zero"), "is outside the repository"},
			{"a URL", "https://example.com/values.yaml", "is a URL"},
			{"a directory", "../shared", "is not a regular file"},
			{"a file over the size cap", "../values/big.yaml", fmt.Sprintf("is larger than the %d MiB limit", repofs.MaxFileSize>>20)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := cmpSrv.GenerateFromRepo(t, repo, chartApp, env("PARAM_VALUES_FILES", tt.file))
				require.Error(t, err, "rendered: %v", got)
				require.Contains(t, err.Error(), fmt.Sprintf("parameter values-files: %q %s: values files must be regular files inside the repository", tt.file, tt.wantErr))
				require.NotContains(t, err.Error(), secretValue)
				require.Empty(t, got)
			})
		}
	})

	t.Run("values files inside the repository still work", func(t *testing.T) {
		for file, want := range map[string]string{
			"../shared/values.yaml": "SIBLING-OK", // a sibling directory of the app
			"linked.yaml":           "LINKED-OK",  // a symbolic link in the repository to a file in it
		} {
			got, err := cmpSrv.GenerateFromRepo(t, repo, chartApp, env("PARAM_VALUES_FILES", file))
			require.NoError(t, err, file)
			require.Len(t, got, 1)
			require.Contains(t, got[0], `"leaked":"`+want+`"`, file)
		}
	})

	t.Run("kustomize remote resources", func(t *testing.T) {
		var hits atomic.Int32
		remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
		}))
		t.Cleanup(remote.Close)
		dir := t.TempDir()
		url := remote.URL + "/remote.yaml"
		optIn := "set the plugin parameter kustomize-allow-remote=true"
		tests := []struct{ name, entry, wantErr, hint string }{
			{"an http resource", url, fmt.Sprintf("kustomization.yaml: resources entry %q is remote: kustomize resources, bases and files must be inside the repository", url), optIn},
			{"a git base", "github.com/example/deploy//base?ref=v1", `kustomization.yaml: resources entry "github.com/example/deploy//base?ref=v1" is remote`, optIn},
			{"an ssh git base", "git@github.com:example/deploy.git", `kustomization.yaml: resources entry "git@github.com:example/deploy.git" is remote`, optIn},
			{"a base outside the repository", climb(filepath.Join(repo, "..", "outside-base")), "is outside the repository: kustomize reads only files inside the repository", ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				writeFiles(t, dir, map[string]string{
					"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
					"kustomization.yaml": fmt.Sprintf("resources:\n  - cm.yaml\n  - %s\n", tt.entry),
				})
				got, err := cmpSrv.Generate(t, dir, env())
				require.Error(t, err, "rendered: %v", got)
				require.Contains(t, err.Error(), tt.wantErr)
				require.Contains(t, err.Error(), tt.hint)
				require.NotContains(t, err.Error(), secretValue)
				require.Zero(t, hits.Load(), "the remote resource was requested")
			})
		}

		t.Run("kustomize-allow-remote=true opts in", func(t *testing.T) {
			writeFiles(t, dir, map[string]string{
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
				"kustomization.yaml": fmt.Sprintf("resources:\n  - cm.yaml\n  - %s\n", url),
			})
			got, err := cmpSrv.Generate(t, dir, env("PARAM_KUSTOMIZE_ALLOW_REMOTE", "true"))
			require.NoError(t, err)
			require.Len(t, got, 2)
			require.Contains(t, strings.Join(got, "\n"), `"name":"fetched"`)
			require.EqualValues(t, 1, hits.Load())
		})

		t.Run("kustomize-allow-remote=true still bounds what is fetched", func(t *testing.T) {
			big := strings.Repeat("# padding\n", (MaxRemoteSize/10)+1)
			bounded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/big.yaml": // announced: refused from its Content-Length, before the body is read
					w.Header().Set("Content-Length", strconv.Itoa(len(big)))
					_, _ = w.Write([]byte(big))
				case "/streamed.yaml": // not announced: cut while it is read
					w.(http.Flusher).Flush()
					_, _ = w.Write([]byte(big))
				}
			}))
			t.Cleanup(bounded.Close)
			tests := []struct{ name, entry, wantErr string }{
				{"a resource over the size limit", bounded.URL + "/big.yaml",
					fmt.Sprintf("%s/big.yaml is larger than the %d MiB limit of a remote kustomize resource (Content-Length %d)", bounded.URL, MaxRemoteSize>>20, len(big))},
				{"a streamed resource over the size limit", bounded.URL + "/streamed.yaml",
					fmt.Sprintf("%s/streamed.yaml is larger than the %d MiB limit of a remote kustomize resource", bounded.URL, MaxRemoteSize>>20)},
				{"the cloud metadata service", "http://169.254.169.254/latest/meta-data/iam.yaml",
					"address 169.254.169.254 is refused: link-local, unspecified and multicast addresses (the cloud metadata services among them) are never fetched"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					writeFiles(t, dir, map[string]string{
						"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
						"kustomization.yaml": fmt.Sprintf("resources:\n  - cm.yaml\n  - %s\n", tt.entry),
					})
					got, err := cmpSrv.Generate(t, dir, env("PARAM_KUSTOMIZE_ALLOW_REMOTE", "true"))
					require.Error(t, err, "rendered: %v", got)
					require.Contains(t, err.Error(), tt.wantErr)
					require.Empty(t, got)
				})
			}
		})

		t.Run("kustomize-allow-remote=true opts in to git bases too", func(t *testing.T) {
			gitRepo := t.TempDir()
			writeFiles(t, gitRepo, map[string]string{
				"base/kustomization.yaml": "resources:\n  - cm.yaml\n",
				"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloned\n",
			})
			for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = gitRepo
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "git %v: %s", args, out)
			}
			entry := "file://" + gitRepo + "//base?ref=main"
			writeFiles(t, dir, map[string]string{
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n",
				"kustomization.yaml": fmt.Sprintf("resources:\n  - cm.yaml\n  - %s\n", entry),
			})
			_, err := cmpSrv.Generate(t, dir, env())
			require.ErrorContains(t, err, fmt.Sprintf("resources entry %q is remote", entry))
			got, err := cmpSrv.Generate(t, dir, env("PARAM_KUSTOMIZE_ALLOW_REMOTE", "true"))
			require.NoError(t, err)
			require.Len(t, got, 2)
			require.Contains(t, strings.Join(got, "\n"), `"name":"cloned"`)
		})
	})

	t.Run("an archive bomb in charts/ is refused before Helm decompresses it", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, leakChart)
		writeFiles(t, dir, map[string]string{"charts/bomb-0.1.0.tgz": string(bombArchive(t, "bomb", 1, 256<<20))})
		got, err := cmpSrv.Generate(t, dir, env())
		require.Error(t, err, "rendered: %v", got)
		require.Contains(t, err.Error(), fmt.Sprintf("chart archive charts/bomb-0.1.0.tgz: bomb/zeros-0.bin decompresses to more than the %d MiB limit per file", repofs.MaxFileSize>>20))
	})

	t.Run("a chart that renders too long fails at the render timeout and the process exits", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, leakChart)
		writeFiles(t, dir, map[string]string{"templates/slow.yaml": "{{- range until 20000 }}{{ range until 20000 }}{{ end }}{{ end }}\n"})
		start := time.Now()
		_, err := cmpSrv.Generate(t, dir, env("SYNCMEDIC_RENDER_TIMEOUT", "1s"))
		require.Error(t, err)
		require.Contains(t, err.Error(), "render helm: helm template did not finish within the render deadline")
		require.Less(t, time.Since(start), 30*time.Second)
	})
}

// TestPluginRefusesSymbolicLinksOutOfTheRepository runs `syncmedic cmp generate` the way the cmp-server does (in the
// app directory of a request under ARGOCD_CMP_WORKDIR/_cmp_server, with its environment) on a repository holding
// symbolic links out of it. Argo CD's cmp-server refuses to unpack such links from the repo-server's archive, so
// they reach the plugin only from an init command, a pre-populated work dir or a hand run; the plugin refuses them
// itself.
func TestPluginRefusesSymbolicLinksOutOfTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: needs a go build")
	}
	bin := buildSyncmedic(t)
	base := t.TempDir()
	work := filepath.Join(base, "work")
	repo := filepath.Join(work, "_cmp_server", "6c1e0f3a-request")
	writeFiles(t, base, map[string]string{"outside/secret.yaml": "leaked: " + secretValue + "\n"})
	secret := filepath.Join(base, "outside", "secret.yaml")
	chartApp := filepath.Join(repo, "apps", "chart")
	kustApp := filepath.Join(repo, "apps", "kust")
	for rel, content := range leakChart {
		writeFiles(t, chartApp, map[string]string{rel: content})
	}
	writeFiles(t, kustApp, map[string]string{"kustomization.yaml": "resources:\n  - cm.yaml\n"})
	writeFiles(t, repo, map[string]string{"apps/shared/values.yaml": "leaked: SIBLING-OK\n"})
	link := func(target, at string) { require.NoError(t, os.Symlink(target, at)) }
	valuesDir := filepath.Join(repo, "apps", "values") // values files beside the chart: a chart's own files are chart files
	require.NoError(t, os.MkdirAll(valuesDir, 0o755))
	link(secret, filepath.Join(valuesDir, "out.yaml"))
	link("/dev/zero", filepath.Join(valuesDir, "zero.yaml"))
	link("../shared/values.yaml", filepath.Join(valuesDir, "in.yaml"))
	link(secret, filepath.Join(kustApp, "cm.yaml"))

	run := func(t *testing.T, dir string, kv ...string) (string, string, error) {
		t.Helper()
		cmd := exec.Command(bin, "cmp", "generate")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ARGOCD_CMP_WORKDIR="+work, EnvAppName+"=shop", EnvAppNamespace+"=shop")
		cmd.Env = append(cmd.Env, kv...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	exitCode := func(t *testing.T, err error) int {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "want an exit status, got %v", err)
		return ee.ExitCode()
	}

	tests := []struct{ name, dir, param, wantErr string }{
		{"a values file linked out of the repository", chartApp, "PARAM_VALUES_FILES=../values/out.yaml",
			`parameter values-files: "../values/out.yaml" is a symbolic link that leads outside the repository`},
		{"a values file linked to /dev/zero", chartApp, "PARAM_VALUES_FILES=../values/zero.yaml",
			`parameter values-files: "../values/zero.yaml" is a symbolic link that leads outside the repository`},
		{"a kustomize resource linked out of the repository", kustApp, "",
			"is a symbolic link that leads outside the repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := run(t, tt.dir, tt.param)
			require.Equal(t, 3, exitCode(t, err), "stdout: %s\nstderr: %s", stdout, stderr)
			require.Contains(t, stderr, tt.wantErr)
			require.NotContains(t, stdout+stderr, secretValue)
		})
	}
	t.Run("a values file linked inside the repository still works", func(t *testing.T) {
		stdout, stderr, err := run(t, chartApp, "PARAM_VALUES_FILES=../values/in.yaml")
		require.NoError(t, err, stderr)
		require.Contains(t, stdout, `leaked: "SIBLING-OK"`)
	})
	t.Run("a chart template linked out of the repository", func(t *testing.T) {
		link(secret, filepath.Join(chartApp, "templates", "secret.yaml"))
		t.Cleanup(func() { _ = os.Remove(filepath.Join(chartApp, "templates", "secret.yaml")) })
		stdout, stderr, err := run(t, chartApp)
		require.Equal(t, 3, exitCode(t, err), "stdout: %s\nstderr: %s", stdout, stderr)
		require.Contains(t, stderr, "chart file templates/secret.yaml is a symbolic link that leads outside the repository")
		require.NotContains(t, stdout+stderr, secretValue)
	})
}
