package release

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Variant is one kustomize install the release renders into one file: manifests/ directories as resources and
// components, the image set to the release's tag.
type Variant struct {
	// File is the rendered file's name in the release.
	File string
	// Resources and Components are directories relative to manifests/.
	Resources, Components []string
}

// Variants are the installs the release renders (docs/install-kustomize.md, docs/one-tool-installs.md). The
// components that patch Argo CD's own objects (argocd-cmp, components/argocd-account, components/argocd-extension)
// belong in the kustomization that installs Argo CD and have nothing to render on their own.
func Variants() []Variant {
	return []Variant{
		{File: "install.yaml", Resources: []string{"base"}},
		{File: "install-without-flux.yaml", Resources: []string{"base"}, Components: []string{"components/without-flux"}},
		{File: "install-monitoring.yaml", Resources: []string{"base"}, Components: []string{"components/monitoring"}},
		{File: "install-workflows-remedy.yaml", Resources: []string{"base"}, Components: []string{"components/workflows-remedy"}},
		{File: "install-flux-alert.yaml", Resources: []string{"flux"}},
	}
}

// renderInstalls renders every variant, through an overlay that sets the image's tag to the release's, into o.Out.
func renderInstalls(o Options) error {
	for _, v := range Variants() {
		y, err := render(filepath.Join(o.ModuleRoot, "manifests"), v, o.Version)
		if err != nil {
			return fmt.Errorf("release: rendering %s: %w", v.File, err)
		}
		if err := os.WriteFile(filepath.Join(o.Out, v.File), y, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render builds v from the manifests directory with the image tagged version, as `kustomize build` prints it.
func render(manifests string, v Variant, version string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "syncmedic-release-kustomize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var k strings.Builder
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	for _, list := range []struct {
		key  string
		dirs []string
	}{{"resources", v.Resources}, {"components", v.Components}} {
		if len(list.dirs) == 0 {
			continue
		}
		k.WriteString(list.key + ":\n")
		for _, d := range list.dirs {
			rel, err := filepath.Rel(dir, filepath.Join(manifests, d))
			if err != nil {
				return nil, err
			}
			k.WriteString("  - " + rel + "\n")
		}
	}
	fmt.Fprintf(&k, "images:\n  - name: %s\n    newTag: %s\n", ImageRepository, version)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		return nil, err
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}
