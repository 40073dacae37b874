package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/ui"
)

var updateDigest = flag.Bool("update-digest", false, "rewrite components/argocd-extension/extension.tar.sha256 from the bundle ui embeds")

// extensionDigestFile is the digest the component pins, in sha256sum's format, as the installer reads it;
// chartDigestFile is the same digest in the chart, which its NOTES put into the argo-cd chart's values.
var (
	extensionDigestFile = filepath.Join("components", "argocd-extension", "extension.tar.sha256")
	chartDigestFile     = filepath.Join(chartDir, "files", "extension.tar.sha256")
)

// served is what serve answers at path (ui.ExtensionArchivePath, ui.ExtensionBundlePath).
func served(t *testing.T, path string) []byte {
	t.Helper()
	hs, err := ui.Handlers(ui.Options{Incidents: func() []incident.Incident { return nil }, Token: []byte(strings.Repeat("t", ui.MinTokenLength))})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	hs[path].ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.Bytes()
}

func sha256Line(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) + "  extension.tar\n"
}

// TestTheExtensionComponentPinsTheArchiveServeServes keeps the committed digest equal to the archive serve serves
// (rebuilding the bundle changes it: go test ./manifests -run TestTheExtensionComponentPinsTheArchiveServeServes
// -update-digest), and checks that the component hands it to the installer.
func TestTheExtensionComponentPinsTheArchiveServeServes(t *testing.T) {
	want := sha256Line(served(t, ui.ExtensionArchivePath))
	if *updateDigest {
		require.NoError(t, os.WriteFile(extensionDigestFile, []byte(want), 0o644))
		require.NoError(t, os.WriteFile(chartDigestFile, []byte(want), 0o644))
	}
	for _, f := range []string{extensionDigestFile, chartDigestFile} {
		got, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Equal(t, want, string(got), "%s: the bundle changed: go test ./manifests -run TestTheExtensionComponentPinsTheArchiveServeServes -update-digest", f)
	}

	dir := writeKustomization(t, map[string]string{"install.yaml": argoCDServerWithMetricsExtension})
	comp, err := filepath.Abs(filepath.Join("components", "argocd-extension"))
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, comp)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources: [install.yaml]\ncomponents: ["+rel+"]\n"), 0o644))
	objs := build(t, dir)
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "argocd-server"), &d)
	var installer corev1.Container
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == "syncmedic-extension" {
			installer = c
		}
	}
	env := map[string]string{}
	for _, e := range installer.Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "file:///etc/syncmedic-extension-digest/extension.tar.sha256", env["EXTENSION_CHECKSUM_URL"])
	require.Equal(t, "extension.tar", filepath.Base(env["EXTENSION_URL"]), "the installer looks the digest up by the URL's file name")
	var cmName string
	for _, m := range installer.VolumeMounts {
		if m.MountPath == "/etc/syncmedic-extension-digest" {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					cmName = v.ConfigMap.Name
				}
			}
		}
	}
	require.NotEmpty(t, cmName, "the installer mounts the digest's ConfigMap: %+v", installer.VolumeMounts)
	var cm corev1.ConfigMap
	convert(t, find(t, objs, "ConfigMap", cmName), &cm)
	require.Equal(t, want, cm.Data["extension.tar.sha256"])
}

// TestTheChartNotesPinTheArchiveServeServes reads the argo-cd chart values the chart's NOTES print for the extension:
// the installer runs as an init container of argocd-server with EXTENSION_CHECKSUM_URL on a ConfigMap that the values'
// extraObjects create holding the sha256 of the archive serve serves, and argocd-server mounts only the installed file.
func TestTheChartNotesPinTheArchiveServeServes(t *testing.T) {
	notes := renderNotes(t, "incidentAPI.enabled=true")
	_, block, ok := strings.Cut(notes, "\n  configs:\n")
	require.True(t, ok, "%s", notes)
	var values struct {
		Server struct {
			InitContainers []corev1.Container   `json:"initContainers"`
			Volumes        []corev1.Volume      `json:"volumes"`
			VolumeMounts   []corev1.VolumeMount `json:"volumeMounts"`
			Extensions     map[string]any       `json:"extensions"`
		} `json:"server"`
		ExtraObjects []corev1.ConfigMap `json:"extraObjects"`
	}
	require.NoError(t, yaml.Unmarshal([]byte("  configs:\n"+block), &values), "%s", block)
	require.Nil(t, values.Server.Extensions, "extensionList installs without a checksum: the installer is an init container of its own")
	require.Len(t, values.Server.InitContainers, 1)
	installer := values.Server.InitContainers[0]
	env := map[string]string{}
	for _, e := range installer.Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "http://syncmedic.syncmedic.svc.cluster.local:9292"+ui.ExtensionArchivePath, env["EXTENSION_URL"])
	require.Equal(t, "file:///etc/syncmedic-extension-digest/extension.tar.sha256", env["EXTENSION_CHECKSUM_URL"])
	var cmName string
	for _, m := range installer.VolumeMounts {
		for _, v := range values.Server.Volumes {
			if m.MountPath == "/etc/syncmedic-extension-digest" && v.Name == m.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	require.NotEmpty(t, cmName, "the installer mounts the digest's ConfigMap: %+v", installer.VolumeMounts)
	require.Len(t, values.ExtraObjects, 1)
	require.Equal(t, cmName, values.ExtraObjects[0].Name)
	require.Equal(t, sha256Line(served(t, ui.ExtensionArchivePath)), values.ExtraObjects[0].Data["extension.tar.sha256"])
	require.Equal(t, []corev1.VolumeMount{{Name: "syncmedic-extension", MountPath: "/tmp/extensions/resources/extension-syncmedic.js",
		SubPath: "resources/extension-syncmedic.js"}}, values.Server.VolumeMounts, "argocd-server mounts only syncmedic's file")
}

// TestTheExtensionInstallerRefusesATamperedArchive runs Argo CD's extension installer (install.sh v0.0.8, vendored
// in internal/testenv/extinstaller, under bash for the image's busybox sh) as the component configures it, in a
// mount namespace of its own with a fresh /tmp: the archive serve serves is installed; the same archive with one
// byte of the bundle changed is not, and the installer says why.
func TestTheExtensionInstallerRefusesATamperedArchive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the installer writes to /tmp/extensions/ only; the test gives it its own in a mount namespace, which needs root")
	}
	for _, tool := range []string{"unshare", "bash", "curl", "file", "jq", "sha256sum"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the installer's image has %s", tool)
	}
	archive := served(t, ui.ExtensionArchivePath)
	tampered := append([]byte(nil), archive...)
	i := strings.Index(string(tampered), "syncmedic")
	require.Positive(t, i, "the bundle names syncmedic")
	tampered[i] = 'S'
	digest, err := os.ReadFile(extensionDigestFile)
	require.NoError(t, err)
	script, err := os.ReadFile(filepath.Join("..", "internal", "testenv", "extinstaller", "install.sh"))
	require.NoError(t, err)

	install := func(t *testing.T, served []byte) (string, string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, ui.ExtensionArchivePath, r.URL.Path)
			w.Header().Set("Content-Type", "application/x-tar")
			_, _ = w.Write(served)
		}))
		defer srv.Close()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "install.sh"), script, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "extension.tar.sha256"), digest, 0o644))
		// /mnt holds the script and the pinned digest (as the ConfigMap's mount does); /tmp is a new tmpfs, so
		// /tmp/extensions/ is the installer's alone; afterwards the installed bundle, if any, is printed.
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", `set -e
mount --bind "$1" /mnt
mount -t tmpfs syncmedic-installer-test /tmp
cd /tmp && bash /mnt/install.sh
echo "--- installed:"
cat /tmp/extensions/resources/`+ui.ExtensionFile+`/`+ui.ExtensionFile+` 2>/dev/null || true`, "installer-test", dir)
		cmd.Env = append(os.Environ(), "EXTENSION_NAME=syncmedic", "EXTENSION_URL="+srv.URL+ui.ExtensionArchivePath,
			"EXTENSION_CHECKSUM_URL=file:///mnt/extension.tar.sha256")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		log, installed, ok := strings.Cut(string(out), "--- installed:\n")
		require.True(t, ok, "%s", out)
		return log, installed
	}
	t.Run("the archive serve serves is installed", func(t *testing.T) {
		log, installed := install(t, archive)
		require.Contains(t, log, "UI extension installed successfully")
		require.Equal(t, string(served(t, ui.ExtensionBundlePath)), installed, "the bundle, whole")
	})
	t.Run("a tampered archive is not installed", func(t *testing.T) {
		log, installed := install(t, tampered)
		require.Contains(t, log, "ERROR: extension checksum mismatch")
		require.NotContains(t, log, "UI extension installed successfully")
		require.Empty(t, installed, "nothing is installed")
	})
}
