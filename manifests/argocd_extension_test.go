package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/syncmedic/syncmedic/ui"
)

// argoCDServerWithMetricsExtension is an argocd-server that already installs another UI extension the documented
// way: the extension installer's init container and argocd-server share the volume "extensions" at /tmp/extensions/.
const argoCDServerWithMetricsExtension = `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-rbac-cm}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cmd-params-cm}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-server
spec:
  selector: {matchLabels: {app.kubernetes.io/name: argocd-server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-server}}
    spec:
      initContainers:
        - name: extension-metrics
          image: quay.io/argoprojlabs/argocd-extension-installer:v0.0.8
          env: [{name: EXTENSION_URL, value: "https://example.com/extension.tar.gz"}]
          volumeMounts: [{name: extensions, mountPath: /tmp/extensions/}]
      containers:
        - name: argocd-server
          image: quay.io/argoproj/argocd:v3.6.1
          volumeMounts: [{name: extensions, mountPath: /tmp/extensions/}]
      volumes:
        - name: extensions
          emptyDir: {}
`

// argoCDExtensionFile is Argo CD's pattern for the files it concatenates into /extensions.js (server/server.go,
// extensionsPattern, v3.6.1): it walks /tmp/extensions/ recursively, skipping directories and symlinks.
var argoCDExtensionFile = regexp.MustCompile(`^extension(.*)\.js$`)

// TestArgoCDExtensionKeepsTheOtherExtensions builds the Argo CD side of the extension component over an argocd-server
// that already mounts another extension's volume at /tmp/extensions/, then lays out the container's file system as
// the kubelet would (each volume's content at its mountPath, a subPath's part of it only) after both installers ran,
// and walks it as argocd-server does: both extensions load.
func TestArgoCDExtensionKeepsTheOtherExtensions(t *testing.T) {
	comp, err := filepath.Abs(filepath.Join("components", "argocd-extension"))
	require.NoError(t, err)
	dir := writeKustomization(t, map[string]string{"install.yaml": argoCDServerWithMetricsExtension})
	rel, err := filepath.Rel(dir, comp)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources: [install.yaml]\ncomponents: ["+rel+"]\n"), 0o644))
	var d appsv1.Deployment
	convert(t, find(t, build(t, dir), "Deployment", "argocd-server"), &d)
	spec := d.Spec.Template.Spec
	require.Len(t, spec.InitContainers, 2, "each installer keeps its init container")
	require.Len(t, spec.Containers, 1)

	// What each installer leaves in the volume it mounts at /tmp/extensions/: the archive's resources/ directory.
	installed := map[string]string{}
	for _, c := range spec.InitContainers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/etc/syncmedic-extension-digest" {
				continue // the pinned digest (TestTheExtensionComponentPinsTheArchiveServeServes)
			}
			require.Equal(t, "/tmp/extensions/", m.MountPath, "installer %s", c.Name)
			switch c.Name {
			case "extension-metrics":
				installed[m.Name] = "resources/extension-metrics.js/extension-metrics.js"
			case "syncmedic-extension":
				installed[m.Name] = "resources/" + ui.ExtensionFile + "/" + ui.ExtensionFile
			}
		}
	}
	require.Len(t, installed, 2, "the two installers write into two volumes: %v", installed)

	root := t.TempDir()
	mounts := append([]corev1.VolumeMount(nil), spec.Containers[0].VolumeMounts...)
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].MountPath) < len(mounts[j].MountPath) })
	for _, m := range mounts {
		file, ok := installed[m.Name]
		require.True(t, ok, "argocd-server mounts %s, which no installer writes", m.Name)
		rel, err := filepath.Rel(m.SubPath, file)
		require.NoError(t, err)
		require.NotContains(t, rel, "..", "the subPath %q of %s does not hold %s", m.SubPath, m.Name, file)
		path := filepath.Join(root, m.MountPath, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte("// "+m.Name), 0o644))
	}
	var loaded []string
	require.NoError(t, filepath.Walk(filepath.Join(root, "tmp", "extensions"), func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode()&os.ModeSymlink == 0 && !info.IsDir() && argoCDExtensionFile.MatchString(info.Name()) {
			loaded = append(loaded, info.Name())
		}
		return err
	}))
	sort.Strings(loaded)
	require.Equal(t, []string{"extension-metrics.js", ui.ExtensionFile}, loaded, "argocd-server's mounts: %+v", mounts)
}
