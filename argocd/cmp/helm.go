package cmp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"
)

// renderHelm renders the chart in dir the way `helm template --include-crds` does (and so the way Argo CD does):
// the steps of Helm's client-only install (helm.sh/helm/v3/pkg/action: Install.RunWithContext and
// Configuration.renderResources, v3.16), then each hook under a "# Source:" comment. It calls Helm's chartutil,
// engine and releaseutil directly rather than pkg/action, whose release storage (SQL drivers) and OCI registry
// client (oras, containerd, docker) a render never uses but the binary would carry.
func renderHelm(_ context.Context, dir string, p Params) ([]Doc, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	if ch.Metadata.Dependencies != nil {
		if err := checkDependencies(ch, ch.Metadata.Dependencies); err != nil {
			return nil, fmt.Errorf("%w (vendor the dependencies into charts/, or run `helm dependency build` in the plugin's init command)", err)
		}
	}
	vals, err := helmValues(dir, p)
	if err != nil {
		return nil, err
	}
	name := p.ReleaseName
	if name == "" {
		name = p.AppName
	}
	if name == "" {
		return nil, fmt.Errorf("no release name: set %s (Argo CD does) or the %s parameter", EnvAppName, ParamReleaseName)
	}
	if err := chartutil.ValidateReleaseName(name); err != nil {
		return nil, fmt.Errorf("release name %q: %w", name, err)
	}
	namespace := p.AppNamespace
	if namespace == "" {
		namespace = "default"
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if p.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(p.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvKubeVersion, p.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, chartutil.VersionSet(p.APIVersions)...)
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, err
	}
	values, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
		chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}, caps, false)
	if err != nil {
		return nil, err
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	var e engine.Engine
	files, err := e.Render(ch, values)
	if err != nil {
		return nil, err
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k) // not a manifest (helm prints the chart's own notes apart)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, crd := range ch.CRDObjects() { // --include-crds: first, as Helm writes them
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	out := strings.TrimSpace(b.String()) + "\n"
	for _, h := range hooks {
		out += fmt.Sprintf("---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return SplitStream([]byte(out)), nil
}

// checkDependencies is Helm's action.CheckDependencies: every dependency Chart.yaml names must be in charts/.
func checkDependencies(ch *chart.Chart, reqs []*chart.Dependency) error {
	var missing []string
outer:
	for _, r := range reqs {
		for _, d := range ch.Dependencies() {
			if d.Name() == r.Name {
				continue outer
			}
		}
		missing = append(missing, r.Name)
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}

// helmValues merges, in this order, the values files, the inline values and the set overrides.
func helmValues(dir string, p Params) (map[string]interface{}, error) {
	base := map[string]interface{}{}
	for _, f := range p.ValuesFiles {
		if filepath.IsAbs(f) || strings.Contains(f, "://") {
			return nil, fmt.Errorf("parameter %s: %q must be a path relative to the app directory", ParamValuesFiles, f)
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", ParamValuesFiles, err)
		}
		cur := map[string]interface{}{}
		if err := yaml.Unmarshal(b, &cur); err != nil {
			return nil, fmt.Errorf("parameter %s: %s: %w", ParamValuesFiles, f, err)
		}
		base = mergeMaps(base, cur)
	}
	if strings.TrimSpace(p.Values) != "" {
		cur := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(p.Values), &cur); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", ParamValues, err)
		}
		base = mergeMaps(base, cur)
	}
	keys := make([]string, 0, len(p.Set))
	for k := range p.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := strvals.ParseInto(k+"="+p.Set[k], base); err != nil {
			return nil, fmt.Errorf("parameter %s: %s: %w", ParamSet, k, err)
		}
	}
	return base, nil
}

// mergeMaps merges b into a the way Helm merges values files (helm.sh/helm/v3/pkg/cli/values).
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if v, ok := v.(map[string]interface{}); ok {
			if bv, ok := out[k]; ok {
				if bv, ok := bv.(map[string]interface{}); ok {
					out[k] = mergeMaps(bv, v)
					continue
				}
			}
		}
		out[k] = v
	}
	return out
}
