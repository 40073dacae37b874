package cmp

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/syncmedic/syncmedic/argocd/cmp/repofs"
)

// renderKustomize runs kustomize (krusty, the library behind `kustomize build`) on the directory, reading through a
// filesystem confined to the repository root. Remote resources and bases are refused before kustomize sees them
// unless p.KustomizeAllowRemote opts in; then kustomize fetches them itself (its git clones are readable too), within
// the render deadline, through boundRemoteFetches' limits on http(s) fetches.
func renderKustomize(root *repofs.Root, dir string, p Params) ([]Doc, error) {
	fsys := root.FileSystem()
	if p.KustomizeAllowRemote {
		fsys = root.RemoteFileSystem()
		boundRemoteFetches()
	}
	if err := refuseRemote(root, dir, p.KustomizeAllowRemote, map[string]bool{}); err != nil {
		return nil, err
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, err
	}
	var docs []Doc
	for i, res := range m.Resources() {
		out, err := res.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", res.CurId(), err)
		}
		if i > 0 {
			out = append([]byte("---\n"), out...) // exactly resmap.AsYaml's separator
		}
		docs = append(docs, Doc{Raw: out})
	}
	return docs, nil
}

// errRemote explains the refusal of a remote entry.
var errRemote = errors.New("is remote: kustomize resources, bases and files must be inside the repository " +
	"(vendor them into the repository, or set the plugin parameter " + ParamKustomizeAllowRemote + "=true to let kustomize fetch them)")

// refuseRemote walks the kustomization in dir and the local kustomizations it includes, and returns an error naming
// the first entry kustomize would fetch over the network (an http(s) file, a git repository) or that is not a file or
// directory inside the repository (kustomize would try it as a git repository). With allow, remote entries are let
// through unless their host resolves to an address boundedTransport refuses: checked here too because kustomize hands
// a URL that is not a file to the git binary, which the transport does not see (a remote base's own remote entries
// are fetched by kustomize unchecked, within the render deadline). seen holds the directories visited.
func refuseRemote(root *repofs.Root, dir string, allow bool, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file, k, err := readKustomization(root, dir)
	if err != nil || k == nil {
		return err
	}
	rel := func(path string) string {
		if r, err := filepath.Rel(root.Dir(), path); err == nil {
			return filepath.ToSlash(r)
		}
		return path
	}
	check := func(field, entry string, recurse bool) error {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.Contains(entry, "\n") { // inline patches and configs
			return nil
		}
		if looksRemote(entry) {
			if allow {
				if err := refuseRemoteHost(entry); err != nil {
					return fmt.Errorf("%s: %s entry %q: %w", rel(file), field, entry, err)
				}
				return nil
			}
			return fmt.Errorf("%s: %s entry %q %w", rel(file), field, entry, errRemote)
		}
		real, err := root.Resolve(dir, entry)
		if errors.Is(err, repofs.ErrNotExist) && recurse {
			return fmt.Errorf("%s: %s entry %q is neither a file nor a directory inside the repository, and %w", rel(file), field, entry, errRemote)
		}
		if err != nil {
			return fmt.Errorf("%s: %s entry %q %w: kustomize reads only files inside the repository", rel(file), field, entry, err)
		}
		if recurse && isDir(real) {
			return refuseRemote(root, real, allow, seen)
		}
		return nil
	}
	for _, group := range []struct {
		field   string
		entries []string
		recurse bool
	}{
		{"resources", k.Resources, true},
		{"components", k.Components, true},
		{"generators", k.Generators, true},
		{"transformers", k.Transformers, true},
		{"validators", k.Validators, true},
		{"crds", k.Crds, false},
		{"configurations", k.Configurations, false},
		{"openapi", []string{k.OpenAPI["path"]}, false},
	} {
		for _, e := range group.entries {
			if err := check(group.field, e, group.recurse); err != nil {
				return err
			}
		}
	}
	for _, p := range k.PatchesStrategicMerge {
		if err := check("patchesStrategicMerge", string(p), false); err != nil {
			return err
		}
	}
	for _, patches := range [][]types.Patch{k.Patches, k.PatchesJson6902} {
		for _, p := range patches {
			if err := check("patches", p.Path, false); err != nil {
				return err
			}
		}
	}
	for _, r := range k.Replacements {
		if err := check("replacements", r.Path, false); err != nil {
			return err
		}
	}
	var generators []types.GeneratorArgs
	for _, g := range k.ConfigMapGenerator {
		generators = append(generators, g.GeneratorArgs)
	}
	for _, g := range k.SecretGenerator {
		generators = append(generators, g.GeneratorArgs)
	}
	for _, g := range generators {
		for _, f := range g.FileSources {
			if _, path, ok := strings.Cut(f, "="); ok {
				f = path
			}
			if err := check("files", f, false); err != nil {
				return err
			}
		}
		for _, f := range g.EnvSources {
			if err := check("envs", f, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// readKustomization returns the kustomization file of dir and its content, or a nil Kustomization when dir has none
// (a plain directory of resources).
func readKustomization(root *repofs.Root, dir string) (string, *types.Kustomization, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		path := filepath.Join(dir, name)
		b, err := root.ReadFile(path)
		if errors.Is(err, repofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return path, nil, fmt.Errorf("%s %w", path, err)
		}
		k := &types.Kustomization{}
		if err := k.Unmarshal(b); err != nil {
			return path, nil, fmt.Errorf("%s: %w", path, err)
		}
		k.FixKustomization()
		return path, k, nil
	}
	return "", nil, nil
}

// looksRemote reports whether kustomize would fetch entry: an http(s) URL (its file loader) or anything its git
// repository parser accepts (a scheme, git::, gh:, github.com/…, user@host:…, ?ref=, or the repo//path separator).
func looksRemote(entry string) bool {
	lower := strings.ToLower(entry)
	if strings.Contains(lower, "://") || strings.Contains(lower, "?") || strings.Contains(strings.TrimPrefix(lower, "./"), "//") {
		return true
	}
	for _, prefix := range []string{"git::", "gh:", "github.com/", "github.com:"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	first, _, _ := strings.Cut(lower, "/")
	return strings.Contains(first, "@")
}
