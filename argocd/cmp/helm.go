package cmp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"
)

// renderHelm renders the chart in dir the way `helm template --include-crds` does (and so the way Argo CD does):
// action.Install in client-only dry-run mode, the manifest, then each hook under a "# Source:" comment.
func renderHelm(ctx context.Context, dir string, p Params) ([]Doc, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	if ch.Metadata.Dependencies != nil {
		if err := action.CheckDependencies(ch, ch.Metadata.Dependencies); err != nil {
			return nil, fmt.Errorf("%w (vendor the dependencies into charts/, or run `helm dependency build` in the plugin's init command)", err)
		}
	}
	vals, err := helmValues(dir, p)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...interface{}) {}})
	inst.ClientOnly, inst.DryRun, inst.DryRunOption, inst.Replace, inst.IncludeCRDs = true, true, "client", true, true
	inst.ReleaseName = p.ReleaseName
	if inst.ReleaseName == "" {
		inst.ReleaseName = p.AppName
	}
	if inst.ReleaseName == "" {
		return nil, fmt.Errorf("no release name: set %s (Argo CD does) or the %s parameter", EnvAppName, ParamReleaseName)
	}
	inst.Namespace = p.AppNamespace
	if inst.Namespace == "" {
		inst.Namespace = "default"
	}
	if p.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(p.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvKubeVersion, p.KubeVersion, err)
		}
		inst.KubeVersion = kv
	}
	inst.APIVersions = chartutil.VersionSet(p.APIVersions)
	rel, err := inst.RunWithContext(ctx, ch, vals)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintln(&b, strings.TrimSpace(rel.Manifest))
	for _, h := range rel.Hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return SplitStream([]byte(b.String())), nil
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
