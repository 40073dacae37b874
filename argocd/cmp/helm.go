package cmp

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

// helmRelease is a chart loaded from the repository with its values computed: everything a render needs, read once.
type helmRelease struct {
	chart  *chart.Chart
	values chartutil.Values
}

// loadHelm loads the chart in dir and computes its values the way `helm template --include-crds` does (and so the way
// Argo CD does): the steps of Helm's client-only install (helm.sh/helm/v3/pkg/action: Install.RunWithContext and
// Configuration.renderResources, v3.18) up to the engine. It calls Helm's chartutil directly rather than pkg/action,
// whose release storage (SQL drivers) and OCI registry client (oras, containerd, docker) a render never uses but the
// binary would carry. Every file is read inside root (see loadChart and helmValues).
func loadHelm(root *repofs.Root, dir string, p Params) (*helmRelease, error) {
	ch, err := loadChart(root, dir)
	if err != nil {
		return nil, err
	}
	if ch.Metadata.Dependencies != nil {
		if err := checkDependencies(ch, ch.Metadata.Dependencies); err != nil {
			return nil, fmt.Errorf("%w (vendor the dependencies into charts/, or run `helm dependency build` in the plugin's init command)", err)
		}
	}
	vals, err := helmValues(root, dir, p)
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
	return &helmRelease{chart: ch, values: values}, nil
}

// render runs Helm's template engine, then writes the CRDs, the manifests and each hook under a "# Source:" comment.
// The engine takes no context: it runs in its own goroutine and render returns when ctx ends, with an error naming
// the deadline; the engine goroutine is then abandoned to finish or to end with the process (the generate command
// exits on the error).
func (h *helmRelease) render(ctx context.Context) ([]Doc, error) {
	files, err := untilDone(ctx, "helm template", func() (map[string]string, error) {
		var e engine.Engine
		return e.Render(h.chart, h.values)
	})
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
	for _, crd := range h.chart.CRDObjects() { // --include-crds: first, as Helm writes them
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
// Each values file must be a regular file inside the repository (see repofs.Root.Resolve), of at most
// repofs.MaxFileSize bytes.
func helmValues(root *repofs.Root, dir string, p Params) (map[string]interface{}, error) {
	base := map[string]interface{}{}
	for _, f := range p.ValuesFiles {
		b, err := readValuesFile(root, dir, f)
		if err != nil {
			return nil, err
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

// readValuesFile reads the values file f, a path relative to the app directory dir.
func readValuesFile(root *repofs.Root, dir, f string) ([]byte, error) {
	real, err := root.Resolve(dir, f)
	var b []byte
	if err == nil {
		b, err = root.ReadFile(real)
	}
	if err != nil {
		return nil, fmt.Errorf("parameter %s: %q %w: values files must be regular files inside the repository, "+
			"named relative to the app directory, of at most %d MiB", ParamValuesFiles, f, err, repofs.MaxFileSize>>20)
	}
	return b, nil
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
